// Command nitro trains and evaluates nitro experiments; see `nitro help`.
package main

import (
	"os"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/gan"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/cmd/examples/mnistcnn"
	"github.com/nitro-go/nitro/cmd/examples/seqtransformer"
	"github.com/nitro-go/nitro/cmd/examples/tabular"
)

func main() {
	cli.Register[mnist.MLP]("mnist-mlp", "MLP on MNIST digits (GoMNIST data from the module cache)")
	cli.Register[mnistcnn.CNN]("mnist-cnn", "CNN on MNIST digits (conv 32, conv 64, dense 256; >= 99% test accuracy in 10 epochs)")
	cli.Register[seqtransformer.Transformer]("seq-transformer", "small transformer on generated digit sequences (reverse, or sort)")
	cli.Register[tabular.Regression]("tabular", "MLP regression on generated tabular data, its learning-rate multiplier a Device field")
	cli.Register[gan.GAN]("gan", "GAN on a ring of 2-D Gaussians, trained in manual mode (TrainStep)")
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
