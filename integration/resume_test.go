package integration_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/schedules"
)

// Anchored is the two-group experiment of the resume tests: a hidden layer ("body", decayed
// toward its initial weights, w0) with dropout (the context's RNG state advances every step),
// an output layer ("head", decayed toward zero) at half the rate, a train split reshuffled every
// epoch, accum 2, and optionally a cosine schedule over the run.
type Anchored struct {
	Width  int  `nitro:"graphconst" default:"16"`
	Cosine bool `doc:"eta follows a cosine over the run"`
}

func (e *Anchored) BuildModel(ctx *context.Context) error { return nil }

func (e *Anchored) BuildData() (prefetch.Data, error) {
	x, y := synthetic(256, 1)
	tr, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 16, prefetch.ArrayOptions{DropPartial: true, Shuffle: true, Seed: 5})
	if err != nil {
		return nil, err
	}
	vx, vy := synthetic(72, 2)
	va, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": vx, "y": vy}, 32, prefetch.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	return prefetch.Data{"train": tr, "val": va}, nil
}

func (e *Anchored) Forward(ctx *context.Context, in Inputs) core.Outputs {
	h := activations.Relu(layers.Dense(ctx.In("hidden"), in.X, true, e.Width))
	h = layers.DropoutStatic(ctx, h, 0.2)
	return core.Outputs{"logits": layers.Dense(ctx.In("output"), h, true, classes)}
}

func (e *Anchored) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

func (e *Anchored) ParamGroup(keypath []string) string {
	if keypath[0] == "output" {
		return "head"
	}
	return "body"
}

func (e *Anchored) LearningRateGroup(g string) float64 {
	if g == "head" {
		return 0.005
	}
	return 0.01
}

func (e *Anchored) LambdaGroup(string) float64 { return 0.05 }

// DecayAnchor: the body decays toward the weights BuildModel gave it (w0), the head toward zero.
func (e *Anchored) DecayAnchor(g string) optimizers.Anchor {
	if g == "body" {
		return optimizers.AnchorW0
	}
	return optimizers.AnchorZero
}

func (e *Anchored) LearningRate() float64 { return 0.01 }

func (e *Anchored) Schedules() map[string]any {
	if !e.Cosine {
		return nil
	}
	return map[string]any{optimizers.EtaField: schedules.Cosine(0.01, 0)}
}

// stopAfter wraps a train source to request a stop while epoch k's last batch is read: the run
// finishes epoch k, validates, checkpoints (stop reason "requested") and returns, as a run
// interrupted there would have. The run keeps its full MaxEpochs, so a schedule's horizon is the
// uninterrupted run's.
type stopAfter struct {
	*prefetch.ArrayBatches
	k int
	n **core.Nitro
}

func (s stopAfter) BatchAt(i int) (prefetch.Batch, error) {
	if i == s.Len()-1 && (*s.n).Epoch() == s.k-1 {
		(*s.n).RequestStop()
	}
	return s.ArrayBatches.BatchAt(i)
}

// paramBytes reads every parameter back, by keypath, as raw bytes.
func paramBytes(t testing.TB, n *core.Nitro) map[string][]byte {
	t.Helper()
	ps, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for k, p := range ps {
		p.ConstBytes(func(b []byte) { out[k] = bytes.Clone(b) })
	}
	return out
}

// sameParams fails unless the two runs' parameters are bitwise equal.
func sameParams(t testing.TB, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d parameter arrays, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		if !bytes.Equal(got[k], w) {
			t.Fatalf("%s: parameter %s differs from the uninterrupted run's", what, k)
		}
	}
}

// resumeRun is one exact-resume scenario: mk builds the experiment, data (nil: BuildData) its
// data, requested says how the first run is interrupted after epoch k (true: RequestStop with
// MaxEpochs = total; false: MaxEpochs = k).
type resumeRun struct {
	name      string
	mk        func() any
	data      func(e any) prefetch.Data
	requested bool
	opts      []core.Option
}

// check trains the uninterrupted run once, then for each k the interrupted run into a fresh
// run dir and its resume (auto) to total epochs, and compares the final parameters bit for bit.
func (r resumeRun) check(t *testing.T, total int, ks ...int) {
	dataOf := func(e any) []core.Option {
		if r.data == nil {
			return nil
		}
		return []core.Option{core.WithData(r.data(e))}
	}
	ckpt := func() core.Option {
		tk, err := checkpoint.NewTopK(3, core.ValLoss, "min", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return core.WithCheckpointer(tk)
	}
	e := r.mk()
	straight := train(t, e, append(append(dataOf(e), core.WithMaxEpochs(total)), r.opts...)...)
	want, wantStep := paramBytes(t, straight), straight.Step()
	for _, k := range ks {
		t.Run(fmt.Sprintf("%s/k=%d", r.name, k), func(t *testing.T) {
			dir := t.TempDir()
			e1 := r.mk()
			opts := append(dataOf(e1), core.WithRunDir(dir), ckpt())
			var first *core.Nitro
			if r.requested {
				data := r.data(e1)
				data["train"] = stopAfter{ArrayBatches: data["train"].(*prefetch.ArrayBatches), k: k, n: &first}
				opts = []core.Option{core.WithData(data), core.WithRunDir(dir), ckpt(), core.WithMaxEpochs(total)}
			} else {
				opts = append(opts, core.WithMaxEpochs(k))
			}
			first = build(t, e1, append(opts, r.opts...)...)
			if err := first.Train(); err != nil {
				t.Fatal(err)
			}
			if first.Epoch() != k {
				t.Fatalf("the interrupted run stopped after epoch %d, want %d", first.Epoch(), k)
			}
			h, err := checkpoint.Info(first.LastCheckpoint())
			if err != nil {
				t.Fatal(err)
			}
			wantReason := core.StopCompleted
			if r.requested {
				wantReason = core.StopRequested
			}
			if h.Epoch != k || h.StopReason != wantReason {
				t.Fatalf("its last checkpoint: epoch %d, stop %q; want %d, %q", h.Epoch, h.StopReason, k, wantReason)
			}

			e2 := r.mk()
			second := build(t, e2, append(append(dataOf(e2), core.WithRunDir(dir), ckpt(), core.WithMaxEpochs(total), core.WithResume(core.ResumeAuto)), r.opts...)...)
			if second.Epoch() != k || second.Step() != first.Step() {
				t.Fatalf("resumed at epoch %d step %d, want epoch %d step %d", second.Epoch(), second.Step(), k, first.Step())
			}
			if err := second.Train(); err != nil {
				t.Fatal(err)
			}
			if second.Step() != wantStep || second.StopReason() != core.StopCompleted || len(second.History()) != total-k {
				t.Fatalf("resumed run: step %d (want %d), stop %q, %d epochs trained (want %d)", second.Step(), wantStep, second.StopReason(), len(second.History()), total-k)
			}
			sameParams(t, "after resume", paramBytes(t, second), want)
			t.Logf("%s k=%d: resumed at step %d, %d parameter arrays bitwise equal to the uninterrupted %d-epoch run (step %d)", r.name, k, first.Step(), len(want), total, wantStep)
		})
	}
}

// TestExactResume: a run interrupted after epoch k and resumed with WithResume("auto") ends with
// the parameters of the uninterrupted run (same seed), bit for bit, for k = 1 and 2: the step
// counter, the schedule position, the optimizer state, the RNG and layer state and the data
// order (reshuffled from the seed and the epoch) are all restored.
func TestExactResume(t *testing.T) {
	requireXLA(t)
	dataDir, err := mnist.DataDir("")
	if err != nil {
		prereq.MNIST.Absent(t, err)
	}
	tiny := func() any {
		e, err := markers.FromPreset[mnist.MLP]("tiny", map[string]any{"TrainLimit": 2000, "TestLimit": 200, "ValSize": 400, "DataDir": dataDir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// (a) the MNIST tiny preset (RAdam, shuffled train split), the first run with MaxEpochs = k.
	resumeRun{name: "mnist-tiny", mk: tiny}.check(t, 3, 1, 2)
	// (b) two groups, w0 decay, accum 2, dropout: first with MaxEpochs = k (constant rate), then
	// interrupted by a stop request in a run whose cosine schedule spans all the epochs.
	anchored := func(cosine bool) func() any { return func() any { return &Anchored{Width: 16, Cosine: cosine} } }
	anchoredData := func(e any) prefetch.Data {
		d, err := e.(*Anchored).BuildData()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	resumeRun{name: "two-groups-w0-accum2", mk: anchored(false), data: anchoredData, opts: []core.Option{core.WithAccum(2)}}.check(t, 3, 1, 2)
	resumeRun{name: "two-groups-w0-accum2-cosine-requested", mk: anchored(true), data: anchoredData, requested: true, opts: []core.Option{core.WithAccum(2)}}.check(t, 3, 1, 2)
}

// TestResumeRefusalsAndEarlyStop on XLA: a GraphConst change refuses naming both values, and an
// early-stopped run resumed with auto says so and trains nothing.
func TestResumeRefusalsAndEarlyStop(t *testing.T) {
	requireXLA(t)
	dir := t.TempDir()
	mk := func(width int) *Anchored { return &Anchored{Width: width} }
	con := &core.MemoryConsole{}
	tk := func() core.Option {
		return core.WithCheckpointer(must(checkpoint.NewTopK(2, core.ValLoss, "min", "", nil)))
	}
	es := core.WithEarlyStopping(core.ValLoss, "min", 1, 1e9) // nothing improves by 1e9: stops at epoch 2
	n := build(t, mk(16), core.WithRunDir(dir), tk(), core.WithMaxEpochs(5), es)
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.StopReason() != core.StopEarly || n.Epoch() != 2 {
		t.Fatalf("stop %q after epoch %d, want early_stop after 2", n.StopReason(), n.Epoch())
	}
	_, err := core.New(mk(24), core.WithBackend("xla"), core.Quiet(), core.WithoutLogger(), core.WithRunDir(dir), tk(), core.WithResume("auto"))
	if err == nil || !strings.Contains(err.Error(), "field Width: checkpoint 16, now 24") {
		t.Fatalf("a GraphConst change: %v", err)
	}
	again, err := core.New(mk(16), core.WithBackend("xla"), core.WithConsole(con), core.WithoutLogger(), core.WithRunDir(dir), tk(), core.WithMaxEpochs(5), core.WithResume("auto"), es)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Train(); err != nil {
		t.Fatal(err)
	}
	said := strings.Join(con.Notices, "\n")
	if again.Step() != n.Step() || again.StopReason() != core.StopEarly || !strings.Contains(said, "early stop at epoch 2") {
		t.Fatalf("resumed early-stopped run: step %d (want %d), stop %q, notices:\n%s", again.Step(), n.Step(), again.StopReason(), said)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 { // two checkpoints and the manifest
		t.Errorf("run dir holds %d entries", len(entries))
	}
	if _, err := os.Stat(filepath.Join(dir, checkpoint.ManifestName)); err != nil {
		t.Error(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
