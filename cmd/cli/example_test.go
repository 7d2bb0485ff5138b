package cli_test

import (
	"fmt"
	"os"

	"github.com/nitro-go/nitro/cmd/cli"
)

// A user's own main registers its experiment types and hands the arguments to Main, which
// returns the exit code (os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) in a real main).
func ExampleMain() {
	// (mnist.MLP is registered as "mnist-mlp" by this package's test init.)
	code := cli.Main([]string{"info", "mnist-mlp"}, os.Stdout, os.Stderr)
	fmt.Println("exit", code)
	// Output:
	// Hidden           graphconst int      default 256      hidden layer width
	// Depth            graphconst int      default 2        number of hidden layers
	// LearningRate     host       float64  default 0.003    base learning rate (RAdam), the peak of the cosine schedule
	// Cosine           host       bool     default true     decay the learning rate to 0 over the run along a cosine
	// BatchSize        host       int      default 128      training batch size
	// EvalBatchSize    host       int      default 500      evaluation batch size
	// MaxEpochs        host       int      default 5        epochs to train
	// Seed             host       int      default 42       seed for initialization, shuffling and the validation carve
	// ValSize          host       int      default 5000     training samples carved off (fixed seed) for validation
	// TrainLimit       host       int      default 0        use only the first N training images (0: all 60000)
	// TestLimit        host       int      default 0        use only the first N test images (0: all 10000)
	// DataDir          host       string   default          folder of the MNIST files: the idx.gz files, or train.parquet and t10k.parquet with Format parquet (empty: GoMNIST in the module cache, converted once into the user cache for parquet)
	// Format           host       string   default idx      what DataDir holds: idx (the gzipped idx files) or parquet (mnist.WriteParquet's files)
	// TwoGroups        host       bool     default false    split parameters into backbone (hidden layers) and head (output layer)
	// BackboneRate     host       float64  default 0.0001   backbone learning rate when TwoGroups
	// Decay            host       float64  default 0        decay coefficient of every group (pre-multiplied by the group's rate)
	// exit 0
}

// Register names an experiment type for the commands; info then lists its fields and kinds.
func ExampleRegister() {
	type Sweep struct {
		Width int `nitro:"graphconst" default:"8"`
	}
	cli.Register[Sweep]("sweep", "a registered experiment type (hooks omitted here)")
	cli.Main([]string{"info", "sweep"}, os.Stdout, os.Stderr)
	// Output:
	// Width            graphconst int      default 8
}

// `nitro setup` installs the pinned XLA CPU PJRT plugin; here offline, from a wheel downloaded
// beforehand, into a chosen folder (without --dir: the user cache folder, which nitro searches).
// This wheel was never downloaded, so setup stops before touching the folder, exit code 1, the
// error on stderr (here sent to stdout to show it).
func ExampleMain_setup() {
	code := cli.Main([]string{"setup", "--wheel", "xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl", "--dir", "/opt/nitro/pjrt"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// nitro: open xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl: no such file or directory
	// exit 1
}
