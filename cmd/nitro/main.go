// Command nitro trains and evaluates nitro experiments; see `nitro help`.
package main

import (
	"os"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/gan"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
)

func main() {
	cli.Register[mnist.MLP]("mnist-mlp", "MLP on MNIST digits (GoMNIST data from the module cache)")
	cli.Register[gan.GAN]("gan", "GAN on a ring of 2-D Gaussians, trained in manual mode (TrainStep)")
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
