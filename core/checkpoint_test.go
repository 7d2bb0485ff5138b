package core_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
)

// shuffled is a train split that reshuffles every epoch (from its seed and the epoch) and a val
// split: a resume must replay the same order.
func shuffled(t testing.TB) prefetch.Data {
	return prefetch.Data{
		"train": coretest.Arrays(t, 64, 8, 1, prefetch.ArrayOptions{DropPartial: true, Shuffle: true, Seed: 11}),
		"val":   coretest.Arrays(t, 24, 16, 2, prefetch.ArrayOptions{}),
	}
}

// Dropped is Groups with dropout on the hidden layer: training draws from the context's RNG,
// whose state a checkpoint must carry for a resume to be exact.
type Dropped struct{ Groups }

func (*Dropped) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	h := layers.Dense(ctx.In("backbone"), in.X, true, 8)
	h = layers.DropoutStatic(ctx, h, 0.25)
	return core.Outputs{"pred": layers.Dense(ctx.In("head"), h, true, 1)}
}

// sameBits fails unless a and b are equal bit for bit.
func sameBits(t testing.TB, what string, a, b []float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values vs %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("%s: value %d differs: %v vs %v", what, i, a[i], b[i])
		}
	}
}

// manifest reads dir's checkpoint manifest, failing the test on a read error (no manifest is no
// entries, not an error).
func manifest(t testing.TB, dir string) []checkpoint.ManifestEntry {
	t.Helper()
	e, err := checkpoint.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestDefaultCheckpointer: with no option, a run checkpoints into its run dir through TopK(3,
// val_loss, min): one record per epoch, the three best plus the newest kept, the record holding
// the training state under stable names and the run's metadata, the last one the stop reason.
func TestDefaultCheckpointer(t *testing.T) {
	dir := t.TempDir()
	n := coretest.New(t, &Groups{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(5), core.WithPreset("tiny"))...)
	if _, ok := n.Checkpointer().(*checkpoint.TopK); !ok {
		t.Fatalf("default checkpointer %T, want *checkpoint.TopK", n.Checkpointer())
	}
	coretest.Train(t, n)
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 || len(entries) > 4 {
		t.Fatalf("manifest %+v: want the 3 best plus the newest", entries)
	}
	newest := entries[len(entries)-1]
	if newest.Epoch != 5 || newest.StopReason != core.StopCompleted || newest.Metric != "val_loss" || newest.Score == nil ||
		!strings.HasPrefix(newest.File, "epoch-0005-step-40-val_loss=") {
		t.Errorf("newest entry %+v", newest)
	}
	if n.LastCheckpoint() != filepath.Join(dir, newest.File) {
		t.Errorf("LastCheckpoint %q, want %q", n.LastCheckpoint(), filepath.Join(dir, newest.File))
	}
	rec, err := checkpoint.Read(filepath.Join(dir, newest.File))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range rec.Tensors {
		names = append(names, tn.Name)
	}
	for _, want := range []string{"param/backbone/dense/weights", "param/backbone/dense/biases", "param/head/dense/weights", "param/head/dense/biases",
		"opt/backbone/0.radam.mu/backbone/dense/weights", "opt/head/0.radam.nu/head/dense/biases", "state/#rngState"} {
		if !slices.Contains(names, want) {
			t.Errorf("record tensors %v lack %q", names, want)
		}
	}
	for _, name := range names {
		if strings.Contains(name, ".decay.") {
			t.Errorf("record holds %q: Decay's anchor and mask are rebuilt at setup, never stored", name)
		}
	}
	w, ok := rec.Tensor("param/backbone/dense/weights")
	if !ok {
		t.Fatal("the record has no param/backbone/dense/weights")
	}
	if w.DType != tensorfile.F32 || !slices.Equal(w.Shape, []int{4, 8}) {
		t.Errorf("param/backbone/dense/weights is %s%v, want F32[4 8]", w.DType, w.Shape)
	}
	if rec.Epoch != 5 || rec.Step != 40 || rec.StopReason != core.StopCompleted || rec.Preset != "tiny" ||
		rec.Position != (checkpoint.Position{Epoch: 5, Batch: 8, GlobalBatch: 8, EpochBatches: 8}) || !strings.Contains(rec.Build, "github.com/nitro-go/nitro/core@") {
		t.Errorf("record metadata: epoch %d step %d stop %q preset %q position %+v build %q", rec.Epoch, rec.Step, rec.StopReason, rec.Preset, rec.Position, rec.Build)
	}
	for _, m := range []string{"val_loss", "train_loss"} {
		if _, ok := rec.Metrics[m]; !ok {
			t.Errorf("record metrics %v lack %s", rec.Metrics, m)
		}
	}
	if !strings.HasPrefix(rec.AnchorChecksums["backbone"], "sha256:") || len(rec.AnchorChecksums) != 1 {
		t.Errorf("anchor checksums %v: want one for the w0-anchored backbone only", rec.AnchorChecksums)
	}
	// Only the final checkpoint records a stop reason.
	first, err := checkpoint.Info(filepath.Join(dir, entries[0].File))
	if err != nil {
		t.Fatal(err)
	}
	if entries[0].Epoch != 5 && first.StopReason != "" {
		t.Errorf("epoch %d's checkpoint records stop reason %q", first.Epoch, first.StopReason)
	}
}

// resumeCase trains k epochs into dir, then a second Nitro resumes ("auto") to total epochs; the
// final parameters must be those of one uninterrupted run, bit for bit.
func resumeCase(t *testing.T, mk func() any, k, total int, opts ...core.Option) {
	t.Helper()
	straight := coretest.New(t, mk(), append(coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(total)), opts...)...)
	coretest.Train(t, straight)

	dir := t.TempDir()
	first := coretest.New(t, mk(), append(coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(k)), opts...)...)
	fresh := first.Uploads() // what setup uploads: every array once
	coretest.Train(t, first)
	con := &core.MemoryConsole{}
	second := coretest.New(t, mk(), append(coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(total), core.WithResume(core.ResumeAuto), core.WithConsole(con)), opts...)...)
	before := second.Uploads()
	if second.Epoch() != k || second.Step() != first.Step() {
		t.Fatalf("resumed at epoch %d step %d, want %d and %d", second.Epoch(), second.Step(), k, first.Step())
	}
	coretest.Train(t, second)
	if second.Step() != straight.Step() || len(second.History()) != total-k {
		t.Fatalf("resumed run: step %d (want %d), %d epochs trained (want %d)", second.Step(), straight.Step(), len(second.History()), total-k)
	}
	sameBits(t, "parameters after resume", flatParams(t, second), flatParams(t, straight))
	if before.Params != 2*fresh.Params || before.LayerState != 2*fresh.LayerState || before.OptState <= fresh.OptState {
		t.Errorf("Uploads after the resume %+v, after a fresh setup %+v: the restore uploads every parameter, layer state and (non-constant) optimizer state array once more", before, fresh)
	}
	if !slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "resumed from "+dir) }) {
		t.Errorf("notices %q: the resume is not reported", con.Notices)
	}
}

// TestResumeIsExact: two groups, w0 decay, accum 2, a reshuffled train split, dropout (the RNG
// state) and layer state: interrupted after epoch k and resumed, the run ends where the
// uninterrupted one does, bit for bit, on each backend.
func TestResumeIsExact(t *testing.T) {
	onBackends(t, func(t *testing.T, on []core.Option) {
		for _, k := range []int{1, 2} {
			resumeCase(t, func() any { return &Dropped{} }, k, 3, append([]core.Option{core.WithAccum(2)}, on...)...)
			resumeCase(t, func() any { return &Counter{} }, k, 3, on...)
		}
	})
}

// interruptAt calls Interrupt when the loop reads batch at (of the first epoch), as Ctrl+C would;
// it keeps the shuffled source's BeginEpoch.
type interruptAt struct {
	*prefetch.ArrayBatches
	at int
	n  **core.Nitro
}

func (s interruptAt) BatchAt(i int) (prefetch.Batch, error) {
	if i == s.at && (*s.n).Epoch() == 0 {
		(*s.n).Interrupt()
	}
	return s.ArrayBatches.BatchAt(i)
}

// TestResumeFinishesAnInterruptedEpoch: a run interrupted part-way through an epoch checkpoints
// there (stop reason requested, the data position mid-epoch); the resume finishes that epoch
// from the same batch, exactly, on each backend.
func TestResumeFinishesAnInterruptedEpoch(t *testing.T) {
	onBackends(t, func(t *testing.T, on []core.Option) {
		straight := coretest.New(t, &Groups{}, append(coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(2)), on...)...)
		coretest.Train(t, straight)

		dir := t.TempDir()
		var n *core.Nitro
		d := shuffled(t)
		// Inline (no read-ahead), so the interrupt lands while the loop is at batch 3.
		d["train"] = prefetch.NoPrefetch(interruptAt{ArrayBatches: d["train"].(*prefetch.ArrayBatches), at: 3, n: &n})
		n = coretest.New(t, &Groups{}, append(coretest.CkptOpts(dir, core.WithData(d), core.WithMaxEpochs(2)), on...)...)
		coretest.Train(t, n)
		h, err := checkpoint.Info(n.LastCheckpoint())
		if err != nil {
			t.Fatal(err)
		}
		if h.StopReason != core.StopRequested || h.Position != (checkpoint.Position{Epoch: 1, Batch: 4, GlobalBatch: 8, EpochBatches: 8}) {
			t.Fatalf("interrupted checkpoint: stop %q position %+v", h.StopReason, h.Position)
		}
		second := coretest.New(t, &Groups{}, append(coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto)), on...)...)
		coretest.Train(t, second)
		if second.Step() != straight.Step() {
			t.Fatalf("steps %d, want %d", second.Step(), straight.Step())
		}
		sameBits(t, "parameters", flatParams(t, second), flatParams(t, straight))
	})
}

// TestResumeAutoWithNothingStartsFresh: resume auto in an empty run dir trains from scratch and
// says so once.
func TestResumeAutoWithNothingStartsFresh(t *testing.T) {
	con := &core.MemoryConsole{}
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithResume("auto"), core.WithConsole(con))...)
	if n.Epoch() != 0 || n.Step() != 0 || len(con.Notices) != 1 || !strings.Contains(con.Notices[0], "no checkpoint") || !strings.Contains(con.Notices[0], "fresh run") {
		t.Fatalf("epoch %d step %d notices %q", n.Epoch(), n.Step(), con.Notices)
	}
	coretest.Train(t, n)
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithResume("auto")), "WithResume(\"auto\")", "WithoutCheckpoints")
}

// Width is Reg with a GraphConst hidden width and a Device scale.
type Width struct {
	coretest.Base
	Hidden int `nitro:"graphconst"`
	Note   string
}

func (e *Width) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	h := layers.Dense(ctx.In("hidden"), in.X, true, e.Hidden)
	return core.Outputs{"pred": layers.Dense(ctx.In("out"), h, true, 1)}
}

// TestResumeRefusesAGraphConstChange: a GraphConst field that differs from the record refuses,
// naming the field and both values; a Host change is allowed and reported.
func TestResumeRefusesAGraphConstChange(t *testing.T) {
	dir := t.TempDir()
	coretest.Train(t, coretest.New(t, &Width{Hidden: 4, Note: "a"}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)))...))
	_, err := core.New(&Width{Hidden: 6, Note: "a"}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithResume("auto"))...)
	coretest.WantErr(t, err, "refused", "GraphConst", "field Hidden: checkpoint 4, now 6")

	con := &core.MemoryConsole{}
	n := coretest.New(t, &Width{Hidden: 4, Note: "b"}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithResume("auto"), core.WithConsole(con))...)
	if n.Epoch() != 1 || !slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "Host field Note: checkpoint a, now b") }) {
		t.Errorf("epoch %d, notices %q: want the resume, the Host change reported", n.Epoch(), con.Notices)
	}
}

// TestResumeRefusesAnotherAnchor: a w0-anchored group whose initial weights differ (another
// seed) refuses to resume: the run would decay toward another point.
func TestResumeRefusesAnotherAnchor(t *testing.T) {
	dir := t.TempDir()
	coretest.Train(t, coretest.New(t, &Groups{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)))...))
	_, err := core.New(&Groups{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithSeed(7), core.WithResume("auto"))...)
	coretest.WantErr(t, err, "refused", `group "backbone"`, "w0", "anchor checksum")
}

// TestCheckpointMetricMustExist: a ranking metric the val split does not report is a setup
// error naming the ones it does; with no val split, checkpoints are unscored.
func TestCheckpointMetricMustExist(t *testing.T) {
	_, err := core.New(&Rows{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)))...)
	coretest.WantErr(t, err, `checkpoint metric "val_loss"`, "val_mse, val_rows, val_sse", "WithoutCheckpoints")

	tk := must(checkpoint.NewTopK(2, "val_mse", "min", "", nil))
	dir := t.TempDir()
	coretest.Train(t, coretest.New(t, &Rows{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithCheckpointer(tk))...))
	if e := manifest(t, dir); len(e) != 1 || e[0].Metric != "val_mse" || e[0].Score == nil {
		t.Errorf("manifest %+v: want one checkpoint scored by val_mse", e)
	}

	dir = t.TempDir()
	coretest.Train(t, coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 0)))...))
	if e := manifest(t, dir); len(e) != 1 || e[0].Score != nil || strings.Contains(e[0].File, "=") {
		t.Errorf("manifest %+v: want one unscored checkpoint for a run with no val split", e)
	}
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithEarlyStopping("val_loss", "min", 2, 0)), "WithEarlyStopping", `no "val" split`)
	coretest.WantErr(t, newErr(t, &Rows{}, coretest.Data(t, 16), core.WithEarlyStopping("val_accuracy", "max", 2, 0)), "val_accuracy", "val_mse")
	coretest.WantErr(t, newErr(t, &Rows{}, coretest.Data(t, 16), core.WithEarlyStopping("val_mse", "down", 2, 0)), `mode "down"`)
}

// NaNMetric reports a metric that is NaN.
type NaNMetric struct{ coretest.Base }

func (*NaNMetric) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	g := out["pred"].Graph()
	zero := graph.ScalarZero(g, out["pred"].DType())
	return map[string]hooks.Metric{"bad": {Sum: graph.Div(zero, zero)}, "mse": {Sum: coretest.MSE(out["pred"], in.Y)}}
}

// TestNonFiniteControlMetricStops: the ranking metric goes through the validated readback; NaN
// stops the run with an error naming it, before anything is saved.
func TestNonFiniteControlMetricStops(t *testing.T) {
	dir := t.TempDir()
	tk := must(checkpoint.NewTopK(2, "val_bad", "min", "", nil))
	n := coretest.New(t, &NaNMetric{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithCheckpointer(tk))...)
	coretest.WantErr(t, n.Train(), "epoch 1", `checkpoint metric "val_bad"`, "NaN")
	if e := manifest(t, dir); len(e) != 0 {
		t.Errorf("a checkpoint was saved: %+v", e)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".safetensors") {
			t.Errorf("%s was written after the NaN stop", f.Name())
		}
	}
	// Only logged, a NaN metric stops nothing.
	coretest.Train(t, coretest.New(t, &NaNMetric{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithCheckpointer(must(checkpoint.NewTopK(2, "val_mse", "min", "", nil))))...))
}

// TestEarlyStopping: no improvement by more than minDelta for patience epochs stops gracefully:
// the epoch validated and checkpointed with stop reason early_stop, the logger finished with
// early_stop. Resuming it says so and trains nothing.
func TestEarlyStopping(t *testing.T) {
	dir := t.TempDir()
	lg := &logjson.Memory{}
	es := core.WithEarlyStopping("val_loss", "min", 2, 1e9) // no epoch improves by 1e9
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithLogger(lg), es)...)
	coretest.Train(t, n)
	if n.StopReason() != core.StopEarly || n.Epoch() != 3 || len(n.History()) != 3 || n.History()[2].Val == nil {
		t.Fatalf("stop %q after %d epochs: want early_stop after 3 validated epochs (the first sets the best, two more without improvement)", n.StopReason(), n.Epoch())
	}
	if lg.Status() != logjson.StatusEarlyStop {
		t.Errorf("logger finished with %q, want early_stop", lg.Status())
	}
	e := manifest(t, dir)
	if len(e) == 0 {
		t.Fatal("no checkpoint in the manifest")
	}
	if last := e[len(e)-1]; last.Epoch != 3 || last.StopReason != core.StopEarly {
		t.Fatalf("newest checkpoint %+v: want epoch 3, early_stop", last)
	}
	rec := must(checkpoint.Read(filepath.Join(dir, e[len(e)-1].File)))
	var ctl map[string]json.RawMessage
	if err := json.Unmarshal(rec.Control, &ctl); err != nil || !strings.Contains(string(ctl["early_stopping"]), `"bad_epochs":2`) {
		t.Errorf("record control %s: want the early-stopping state", rec.Control)
	}

	con := &core.MemoryConsole{}
	again := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithResume("auto"), core.WithConsole(con), es)...)
	coretest.Train(t, again)
	if again.StopReason() != core.StopEarly || again.Step() != n.Step() || len(again.History()) != 0 {
		t.Errorf("resumed early-stopped run: stop %q, step %d (want %d), %d epochs trained", again.StopReason(), again.Step(), n.Step(), len(again.History()))
	}
	if !slices.ContainsFunc(con.Notices, func(s string) bool {
		return strings.Contains(s, "early stop at epoch 3") && strings.Contains(s, "nothing to train")
	}) {
		t.Errorf("notices %q: the resume of an early-stopped run must say so", con.Notices)
	}
	// With a patience that does not stop there, the resumed run trains on.
	more := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(4), core.WithResume("auto"), core.WithEarlyStopping("val_loss", "min", 5, 1e9))...)
	coretest.Train(t, more)
	if more.Epoch() != 4 || more.StopReason() != core.StopCompleted {
		t.Errorf("patience 5: epoch %d stop %q, want 4 completed", more.Epoch(), more.StopReason())
	}
}

// TestWithCheckpointLoadsWeightsOnly: a checkpoint's weights, evaluated as the run left them,
// with the counters at zero; a directory means its newest checkpoint.
func TestWithCheckpointLoadsWeightsOnly(t *testing.T) {
	dir := t.TempDir()
	n := coretest.New(t, &Counter{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2))...)
	coretest.Train(t, n)
	want := must(n.Validate())
	for _, from := range []string{dir, n.LastCheckpoint()} {
		w := coretest.New(t, &Counter{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 16)), core.WithCheckpoint(from))...)
		if w.Epoch() != 0 || w.Step() != 0 {
			t.Errorf("%s: epoch %d step %d, want 0 0", from, w.Epoch(), w.Step())
		}
		sameBits(t, "weights", flatParams(t, w), flatParams(t, n))
		got := must(w.Validate())
		if math.Float64bits(got["val_loss"]) != math.Float64bits(want["val_loss"]) {
			t.Errorf("%s: val_loss %v, the trained run's %v", from, got["val_loss"], want["val_loss"])
		}
		st := must(w.States())
		if c := st["/counter/count"].Value().(float32); c != 8 {
			t.Errorf("layer state counter %v, want the trained 8", c)
		}
	}
	coretest.WantErr(t, newErr(t, &Width{Hidden: 4}, coretest.Data(t, 16), core.WithCheckpoint(dir)), "does not fit this model", "missing: param/hidden/dense/biases", "not in this model: param/dense_0/dense/biases")
	if _, err := os.Stat(filepath.Join(dir, checkpoint.ManifestName)); err != nil {
		t.Fatal(err)
	}
}

// TestResumeReattachesTheLogger: the record keeps the logger's type, run id and resumable state;
// a resume hands the state back before anything is logged, and refuses another logger type. On
// each backend.
func TestResumeReattachesTheLogger(t *testing.T) {
	onBackends(t, func(t *testing.T, on []core.Option) {
		dir := t.TempDir()
		lg := &logjson.Memory{ID: "run-7", URL: "https://example.invalid/run-7"}
		n := coretest.New(t, &coretest.Reg{}, append(coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithLogger(lg)), on...)...)
		coretest.Train(t, n)
		rec := must(checkpoint.Read(n.LastCheckpoint()))
		if rec.LoggerType != "*github.com/nitro-go/nitro/logjson.Memory" || string(rec.LoggerState) != `{"run_id":"run-7"}` ||
			rec.RunID != "run-7" || rec.RunURL != lg.URL {
			t.Fatalf("record logger %q state %s run %q %q", rec.LoggerType, rec.LoggerState, rec.RunID, rec.RunURL)
		}
		again := &logjson.Memory{}
		resumed := coretest.New(t, &coretest.Reg{}, append(coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithResume("auto"), core.WithLogger(again)), on...)...)
		if calls := again.Calls(); again.ID != "run-7" || len(calls) < 2 || calls[0].Verb != "reattach" || calls[1].Verb != "params" {
			t.Errorf("resumed logger: id %q, calls %+v: want the state reattached before the params", again.ID, calls)
		}
		sameBits(t, "resumed parameters", flatParams(t, resumed), flatParams(t, n))
		jl := logjson.NewJSONLogger(filepath.Join(t.TempDir(), "m.jsonl"))
		_, err := core.New(&coretest.Reg{}, append(coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithResume("auto"), core.WithLogger(jl)), on...)...)
		coretest.WantErr(t, err, "logjson.Memory", "logjson.JSONLogger")
	})
}

// Chosen picks its own checkpointer (ranked by its own metric) and names its files.
type Chosen struct{ Rows }

func (*Chosen) Checkpointer() checkpoint.Checkpointer {
	return must(checkpoint.NewTopK(1, "val_mse", "min", "", nil))
}

func (*Chosen) CheckpointFilename(a checkpoint.NameArgs) string {
	return fmt.Sprintf("e%d-%s.safetensors", a.Epoch, a.Metric)
}

// TestExperimentChoosesItsCheckpointer: an experiment's Checkpointer and CheckpointFilename
// methods are used when the run passes no checkpointer; the run's option wins over them.
func TestExperimentChoosesItsCheckpointer(t *testing.T) {
	dir := t.TempDir()
	coretest.Train(t, coretest.New(t, &Chosen{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2))...))
	e := manifest(t, dir)
	var files []string
	for _, x := range e {
		files = append(files, x.File)
	}
	if len(files) == 0 || files[len(files)-1] != "e2-val_mse.safetensors" || e[0].Metric != "val_mse" {
		t.Errorf("manifest files %v: want the experiment's names, ranked by val_mse", files)
	}
	if n := coretest.New(t, &Chosen{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithoutCheckpoints())...); n.Checkpointer() != nil {
		t.Errorf("WithoutCheckpoints lost to the experiment's Checkpointer: %T", n.Checkpointer())
	}
}

// PresetReg has named presets: the recorded-preset form builds from one and records its name.
type PresetReg struct {
	coretest.Base
	Note string
}

func (PresetReg) Presets() map[string]map[string]any {
	return map[string]map[string]any{"baseline": {"Note": "from the recipe"}}
}

func TestNewFromPresetRecordsThePreset(t *testing.T) {
	mem := &logjson.Memory{}
	n, err := core.NewFromPreset[PresetReg]("baseline", nil, append(coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0))), core.WithLogger(mem))...)
	if err != nil {
		t.Fatal(err)
	}
	if n.Preset() != "baseline" || n.Experiment().(*PresetReg).Note != "from the recipe" {
		t.Errorf("preset %q, Note %q", n.Preset(), n.Experiment().(*PresetReg).Note)
	}
	if p := mem.Params(); len(p) == 0 || p[0]["preset"] != "baseline" {
		t.Errorf("logged params %v lack preset=baseline", p)
	}
	if _, err := core.NewFromPreset[PresetReg]("basline", nil, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0)))...); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("an unknown preset: %v, want an error naming the valid ones", err)
	}
}
