// Command nitro trains and evaluates nitro experiments; see `nitro help`.
package main

import (
	"os"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/gan"
	"github.com/nitro-go/nitro/cmd/examples/gpt"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/cmd/examples/mnistcnn"
	"github.com/nitro-go/nitro/cmd/examples/seqtransformer"
	"github.com/nitro-go/nitro/cmd/examples/tabular"
	// jemalloc with its decay off under the CPU plugin's step buffers (preloaded by re-executing
	// the program at start): importing it is the opt-in; a program that imports core keeps its own
	// allocator otherwise.
	_ "github.com/nitro-go/nitro/hostalloc"
)

func main() {
	cli.Register[mnist.MLP]("mnist-mlp", "MLP on MNIST digits (GoMNIST data from the module cache)")
	cli.Register[mnistcnn.CNN]("mnist-cnn", "CNN on MNIST digits (conv 32, conv 64, dense 256; >= 99% test accuracy in 10 epochs)")
	cli.Register[seqtransformer.Transformer]("seq-transformer", "small transformer on generated digit sequences (reverse, or sort)")
	cli.Register[tabular.Regression]("tabular", "MLP regression on generated tabular data, its learning-rate multiplier a Device field")
	cli.Register[gan.GAN]("gan", "GAN on a ring of 2-D Gaussians, trained in manual mode (TrainStep)")
	cli.Register[gpt.GPT]("gpt", "decoder-only transformer (GPT-2's shape) on bytes of text, the Go source tree by default")
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
