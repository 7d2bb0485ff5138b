package cli_test

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// sigintEval is a one-layer regression whose test split (8 batches of 4, fed inline) sends the
// process a real SIGINT while batch 2 is taken, once armed, and waits until the run has the stop
// request, so the CLI's handler has called Interrupt before the loop reaches the next boundary.
type sigintEval struct{}

func init() {
	cli.Register[sigintEval]("sigint-eval", "sends itself SIGINT during evaluate (tests Ctrl+C)")
}

var (
	sigintArmed atomic.Bool
	sigintRun   atomic.Value // the monitors.Run of the evaluation, from the process-level monitor
)

type sigintIn struct {
	X *graph.Node `batch:"x"`
}

type sigintTgt struct {
	Y *graph.Node `batch:"y"`
}

func (*sigintEval) BuildData() (prefetch.Data, error) {
	const n, width = 32, 4
	xs, ys := make([]float32, n*width), make([]float32, n)
	for i := range xs {
		xs[i] = float32(i%7) - 3
	}
	for i := range ys {
		ys[i] = float32(i % 5)
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(xs, n, width),
		"y": tensors.FromFlatDataAndDimensions(ys, n, 1),
	}, 4, prefetch.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	return prefetch.Data{"test": prefetch.NoPrefetch(&sigintSource{Source: src, at: 2})}, nil
}

func (*sigintEval) BuildModel(*context.Context) error { return nil }

func (*sigintEval) Forward(ctx *context.Context, in sigintIn) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense"), in.X, true, 1)}
}

func (*sigintEval) Loss(out core.Outputs, in sigintTgt) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["pred"], in.Y)))
}

type sigintSource struct {
	prefetch.Source
	at int
}

func (s *sigintSource) BatchAt(i int) (prefetch.Batch, error) {
	if i == s.at && sigintArmed.CompareAndSwap(true, false) {
		run, _ := sigintRun.Load().(*monitors.Tracker) // the Run core hands monitors is its tracker
		if run == nil {
			return nil, fmt.Errorf("no run recorded by the monitor")
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return nil, err
		}
		// Waits for the signal handler, not for time: the deadline only bounds a broken handler.
		for deadline := time.Now().Add(time.Minute); !run.StopRequested(); {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("SIGINT sent, but the run got no stop request within a minute")
			}
			time.Sleep(time.Millisecond)
		}
	}
	return s.Source.BatchAt(i)
}

// TestEvaluateCtrlC: a SIGINT during `nitro evaluate` stops the split at the next batch boundary,
// prints the partial metrics marked "partial: N of M batches" and the stop reason, and exits 1
// with the stop as the error.
func TestEvaluateCtrlC(t *testing.T) {
	h := monitors.RegisterFunc(func(p monitors.Phase, _ monitors.Progress, info monitors.Info) error {
		if _, ok := p.(monitors.EvalStepping); ok && info.Run != nil && sigintRun.Load() == nil {
			sigintRun.Store(info.Run)
			sigintArmed.Store(true)
		}
		return nil
	})
	t.Cleanup(h.Unregister)
	code, out, errs := runCLI("evaluate", "sigint-eval", "--no-progress")
	h.Unregister()
	if sigintArmed.Load() || sigintRun.Load() == nil {
		t.Fatalf("the source never sent SIGINT: exit %d\n%s\n%s", code, errs, out)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1 for an interrupted evaluation", code)
	}
	for _, w := range []string{"stopped: requested after 3 of 8 batches of split test", "test (partial: 3 of 8 batches): test_loss "} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\ntest: ") {
		t.Errorf("stdout reports the partial metrics as the split's:\n%s", out)
	}
	for _, w := range []string{"nitro: interrupt: stopping after this batch; the metrics will be partial (interrupt again to kill)",
		`nitro: split "test": stopped (requested) after 3 of 8 batches: the metrics are partial`} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
}
