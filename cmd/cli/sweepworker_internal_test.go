package cli

import (
	"os"
	"os/exec"
	"strings"
)

// In tests the executable is the test binary: a worker is that binary running the CLI on its
// arguments, which its TestMain does when NITRO_CLI_TEST_CHILD_ARGS is set (supervisor_unix_test.go).
func init() {
	workerCommand = func(args []string) (*exec.Cmd, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		c := exec.Command(exe)
		c.Env = append(os.Environ(), "NITRO_CLI_TEST_CHILD_ARGS="+strings.Join(args, "\x1f"))
		return c, nil
	}
}
