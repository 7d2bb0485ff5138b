package cli_test

import (
	"os"

	"github.com/nitro-go/nitro/cmd/cli"
)

// A user's own main registers its experiment types and hands the arguments to Main.
func ExampleMain() {
	// (mnist.MLP is registered as "mnist-mlp" by this package's test init.)
	code := cli.Main([]string{"info", "mnist-mlp"}, os.Stdout, os.Stderr)
	_ = code
}

func ExampleRegister() {
	type Sweep struct {
		Width int `nitro:"graphconst" default:"8"`
	}
	cli.Register[Sweep]("sweep", "a registered experiment type (hooks omitted here)")
	cli.Main([]string{"list"}, os.Stdout, os.Stderr)
}

// `nitro setup` installs the pinned XLA CPU PJRT plugin; here offline, from a wheel downloaded
// beforehand, into a chosen folder (without --dir: the user cache folder, which nitro searches).
func ExampleMain_setup() {
	cli.Main([]string{"setup", "--wheel", "xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl", "--dir", "/opt/nitro/pjrt"}, os.Stdout, os.Stderr)
}
