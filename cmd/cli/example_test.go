package cli_test

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nitro-go/nitro/cmd/cli"
)

// A user's own main registers its experiment types and hands the arguments to Main, whose
// result is the process exit code.
func ExampleMain() {
	// (mnist.MLP is registered as "mnist-mlp" by this package's test init.)
	code := cli.Main([]string{"info", "mnist-mlp"}, io.Discard, os.Stderr)
	fmt.Println("exit code", code)
	// Output:
	// exit code 0
}

// Register names an experiment type for the commands; info then lists its fields and kinds.
func ExampleRegister() {
	type Sweep struct {
		Width int `nitro:"graphconst" default:"8"`
	}
	cli.Register[Sweep]("sweep", "a registered experiment type (hooks omitted here)")
	var out strings.Builder
	cli.Main([]string{"list"}, &out, os.Stderr)
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "sweep ") {
			fmt.Println(strings.Join(strings.Fields(line), " "))
		}
	}
	// Output:
	// sweep a registered experiment type (hooks omitted here)
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

// `nitro new DIR` writes a Go module of one's own: an experiment with its test, a main that
// registers it, a Makefile, and go.mod's replace lines pointing at this nitro checkout (the one
// the binary was built from, here; --nitro DIR or $NITRO_SRC name another).
func ExampleMain_new() {
	tmp, err := os.MkdirTemp("", "nitro-new-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "myexp")
	code := cli.Main([]string{"new", dir, "--module", "example.com/me/myexp"}, io.Discard, os.Stderr)
	fmt.Println("exit", code)
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".nitro" {
			return fs.SkipDir // the link to the checkout's plugin, there only when it has one
		}
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	fmt.Println(strings.Join(files, " "))
	// Output:
	// exit 0
	// .gitignore Makefile README.md experiment/experiment.go experiment/experiment_test.go go.mod go.sum main.go
}

// nitro sweep searches an experiment's fields; a refused space costs nothing (no record, no
// trial), and ls and best read a sweep's record.
func ExampleMain_sweep() {
	var out, errOut strings.Builder
	code := cli.Main([]string{"sweep", "mnist-mlp", "--param", "Hidden=uniform:16,64", "--sweep-dir", filepath.Join(os.TempDir(), "never-written")}, &out, &errOut)
	fmt.Println("exit code", code)
	fmt.Println(strings.Contains(errOut.String(), "use Hidden=int:16,64"))
	// Output:
	// exit code 1
	// true
}
