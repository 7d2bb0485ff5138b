package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
	"github.com/nitro-go/nitro/prefetch"
)

// HostInLossDisk reads the Host field Scale in Loss: a zero value compiles (the program is built
// from the Host-zeroed view), any other is refused, in one process or across two.
type HostInLossDisk struct {
	Width int `nitro:"graphconst" default:"8"`
	Scale float64
}

func (e *HostInLossDisk) BuildModel(ctx *context.Context) error { return nil }
func (e *HostInLossDisk) BuildData() (prefetch.Data, error)     { return splits(64, 32, 32) }
func (e *HostInLossDisk) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": mlp(ctx, in.X, e.Width)}
}
func (e *HostInLossDisk) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.AddScalar(graph.ReduceAllMean(xent(out["logits"], in.Y)), e.Scale)
}

const diskChildEnv = "NITRO_TEST_DISK_CACHE_CHILD"

// diskChild is the child half: train HostInLossDisk at the Scale the variable names (one epoch,
// console on stdout), then print the error, if any, and whether it is a Host read of Scale.
func diskChild() {
	var scale float64
	fmt.Sscan(os.Getenv(diskChildEnv), &scale)
	n, err := core.New(&HostInLossDisk{Width: 8, Scale: scale}, core.WithBackend("xla"), core.WithOutput(os.Stdout),
		core.WithoutLogger(), core.WithoutCheckpoints(), core.WithMaxEpochs(1))
	if err == nil {
		err = n.Train()
	}
	var hre *markers.HostReadError
	fmt.Printf("CHILD-ERROR: %v hostread=%v\n", err, errors.As(err, &hre) && strings.Join(hre.Fields, ",") == "Scale")
}

// runDiskChild trains in a fresh process on the cache folder dir; it returns the child's stdout.
func runDiskChild(t *testing.T, dir string, scale float64) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskCacheAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%v", diskChildEnv, scale), backend.EnvCompileCache+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, stderr.String())
	}
	return string(out)
}

var countsLine = regexp.MustCompile(`compile cache: (\d+) compiled, (\d+) from disk`)
var epochLine = regexp.MustCompile(`epoch 1/1  train_loss [0-9.]+  \S+ [0-9.]+`)

// A second process compiles nothing: every program comes from disk, and the run's numbers are
// the first's. The in-process compile check holds unchanged across processes: a process that
// trained with Scale 0 left entries, and the next one, with Scale 3, is refused naming Scale,
// exactly as a second Nitro in one process is.
func TestDiskCacheAcrossProcesses(t *testing.T) {
	if os.Getenv(diskChildEnv) != "" {
		diskChild()
		return
	}
	if m := os.Getenv(startChildEnv); m != "" { // BenchmarkDiskCacheStart's child
		startChild(m)
		return
	}
	requireXLA(t)
	dir := t.TempDir()
	first := runDiskChild(t, dir, 0)
	second := runDiskChild(t, dir, 0)
	c1, c2 := countsLine.FindStringSubmatch(first), countsLine.FindStringSubmatch(second)
	if c1 == nil || c2 == nil {
		t.Fatalf("no counts line:\nfirst:\n%s\nsecond:\n%s", first, second)
	}
	if c1[1] == "0" || c1[2] != "0" {
		t.Fatalf("cold start: %s, want every program compiled", c1[0])
	}
	if c2[1] != "0" || c2[2] != c1[1] {
		t.Fatalf("second start: %s, want 0 compiled and %s from disk", c2[0], c1[1])
	}
	if !strings.Contains(first, "CHILD-ERROR: <nil>") || !strings.Contains(second, "CHILD-ERROR: <nil>") {
		t.Fatalf("a run failed:\n%s\n%s", first, second)
	}
	e1, e2 := epochLine.FindString(first), epochLine.FindString(second)
	if e1 == "" || e1 != e2 {
		t.Fatalf("the run from disk differs from the compiled one: %q vs %q", e1, e2)
	}
	if !regexp.MustCompile(`compile cache +` + regexp.QuoteMeta(dir) + ` \(\d+ entries, `).MatchString(first) {
		t.Fatalf("the config report does not name the folder %s:\n%s", dir, first)
	}
	// Every entry of a real program records its signature (the entry function's header as GoMLX
	// prints it): without one a miss could never be called a changed program, only a new one.
	entries, _, err := diskcache.List(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("entries %v, %v", entries, err)
	}
	for _, e := range entries {
		if m, _, err := diskcache.ReadEntry(filepath.Join(dir, e.File)); err != nil || m.Signature == "" {
			t.Errorf("entry %s (%s): %v, signature %q: want one", e.File, m.Program, err, m.Signature)
		}
	}
	stale := runDiskChild(t, dir, 3)
	if !strings.Contains(stale, "hostread=true") {
		t.Fatalf("Scale 3 after Scale 0 on a warm disk cache: want the Host read of Scale refused, got:\n%s", stale)
	}
}
