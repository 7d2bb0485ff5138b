//go:build unix

package integration_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/hostalloc/seam"
	"github.com/nitro-go/nitro/internal/prereq"
)

// TestNitroUnderPreloadedAllocators: deployments preload an allocator (LD_PRELOAD=libjemalloc.so.2
// is common in ML images). Under each of jemalloc, tcmalloc and mimalloc, the nitro CLI (which
// links hostalloc) trains mnist-mlp --preset tiny, its config report naming the preloaded
// allocator, exports the run and serves the bundle, answering a POST /predict; and a program
// that does not link hostalloc (the README's first experiment, integration/testdata/ctrlc)
// trains on the CPU plugin, its report saying it kept its own allocator. Under jemalloc the CLI
// used to abort while the plugin loaded ("free(): invalid pointer": the hand-written cache
// hostalloc then defined handed jemalloc's blocks to glibc); hostalloc now defines no malloc, and
// a deployment's preload stands.
func TestNitroUnderPreloadedAllocators(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the allocators' LD_PRELOAD is glibc's dynamic linker's; this is " + runtime.GOOS)
	}
	requireXLA(t)
	if _, err := mnist.DataDir(""); err != nil {
		prereq.MNIST.Absent(t, err)
	}
	libs := map[string]string{}
	for _, a := range prereq.PreloadAllocators {
		libs[a.Name] = prereq.Allocator(t, a.File)
	}
	nitro, ctrlc := buildProgram(t, "./cmd/nitro"), buildProgram(t, "./integration/testdata/ctrlc")
	for _, a := range prereq.PreloadAllocators {
		t.Run(a.Name, func(t *testing.T) {
			lib := libs[a.Name]
			env := append(os.Environ(), "NITRO_PJRT_DIR="+filepath.Dir(prereq.Plugin(t)), "LD_PRELOAD="+lib, seam.Env+"=", "GLIBC_TUNABLES=")
			ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
			defer cancel()
			dir := t.TempDir()
			run := func(args ...string) string {
				t.Helper()
				c := exec.CommandContext(ctx, nitro, args...)
				c.Env = env
				out, err := c.CombinedOutput()
				if err != nil {
					t.Fatalf("LD_PRELOAD=%s nitro %s: %v\n%s", lib, strings.Join(args, " "), err, tail(out))
				}
				return string(out)
			}
			out := run("train", "mnist-mlp", "--preset", "tiny", "--run-dir", filepath.Join(dir, "run"), "--no-progress")
			if !regexp.MustCompile(`host allocator +the allocator LD_PRELOAD=` + regexp.QuoteMeta(lib) + ` loads, or glibc's: hostalloc stands aside`).MatchString(out) {
				t.Errorf("train's config report does not name %s as the allocator in force:\n%s", lib, out)
			}
			run("export", "mnist-mlp", "--checkpoint", filepath.Join(dir, "run"), "--out", filepath.Join(dir, "bundle"))
			servePredicts(t, ctx, exec.CommandContext(ctx, nitro, "serve", filepath.Join(dir, "bundle"), "--addr", "127.0.0.1:0"), env)

			c := exec.CommandContext(ctx, ctrlc)
			c.Dir, c.Env = dir, env
			trained, exited := startTraining(t, c, filepath.Join(dir, "runs", "Curve"))
			if err := c.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err != nil {
				t.Fatalf("LD_PRELOAD=%s, a program without hostalloc: %v\n%s", lib, err, tail(trained.Bytes()))
			}
			if !strings.Contains(trained.String(), seam.NotLinked+"; LD_PRELOAD="+lib) {
				t.Errorf("the report of a program without hostalloc does not say it kept its own allocator:\n%s", tail(trained.Bytes()))
			}
		})
	}
}

// buildProgram builds the workspace's main package pkg (a path from the repository root) into a
// temporary folder and returns the binary.
func buildProgram(t testing.TB, pkg string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = root // go.work resolves nitro's modules
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// servePredicts starts serve (c, with env), posts one all-zero MNIST image to /predict, wants
// 200 with outputs, then stops it with SIGINT and wants exit 0.
func servePredicts(t *testing.T, ctx context.Context, c *exec.Cmd, env []string) {
	t.Helper()
	c.Env = env
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer // read while serve runs when a POST fails
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	url := ""
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:[0-9]+/predict)`)
	lines := bufio.NewScanner(stdout)
	for url == "" && lines.Scan() {
		if m := addr.FindStringSubmatch(lines.Text()); m != nil {
			url = m[1]
		}
	}
	go io.Copy(io.Discard, stdout)
	if url == "" {
		c.Wait()
		t.Fatalf("serve printed no address (ctx %v): %s", ctx.Err(), stderr.String())
	}
	body := `{"inputs": {"pixels": [[0` + strings.Repeat(", 0", 783) + `]]}}`
	resp, err := (&http.Client{Timeout: time.Minute}).Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v (serve: %s)", url, err, stderr.String())
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"outputs"`) {
		t.Errorf("POST %s: %d %s", url, resp.StatusCode, answer)
	}
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("serve after SIGINT: %v\n%s", err, stderr.String())
	}
}
