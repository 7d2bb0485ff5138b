package core_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// uneven is a train split with one short batch in the middle (at): only an evaluation split's
// final batch may be short, and a train split's batches must all be equal.
type uneven struct {
	*prefetch.ArrayBatches
	short *prefetch.ArrayBatches
	at    int
}

func (u uneven) BatchAt(i int) (prefetch.Batch, error) {
	if i == u.at {
		return u.short.BatchAt(0)
	}
	return u.ArrayBatches.BatchAt(i)
}

// TestTrainRefusesAnUnequalBatchMidEpoch: a train source whose third batch is short stops the run
// at that step with an error naming both widths, after the two steps before it, with the
// parameters as those two steps left them (the short batch is never stepped on).
func TestTrainRefusesAnUnequalBatchMidEpoch(t *testing.T) {
	d := coretest.Data(t, 16)
	d["train"] = prefetch.NoPrefetch(uneven{ArrayBatches: d["train"].(*prefetch.ArrayBatches), short: coretest.Arrays(t, 8, 8, 3, prefetch.ArrayOptions{}), at: 2})
	n := coretest.MustNew(t, &coretest.Reg{}, d)
	coretest.WantErr(t, n.Train(), "epoch 1, step 3", "train batch has 8 rows", "the train split's batches have 16", "equal batches")
	if n.Step() != 2 {
		t.Errorf("step %d after the refusal, want the 2 steps before the short batch", n.Step())
	}
	two := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": coretest.Arrays(t, 32, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": d["val"]})
	coretest.Train(t, two)
	sameBits(t, "parameters after the two good steps", flatParams(t, n), flatParams(t, two))
}

// Mixed has a float64 parameter beside Dense's float32 ones.
type Mixed struct{ coretest.Base }

func (*Mixed) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	p := layers.Dense(ctx.In("dense_0"), in.X, true, 1)
	s := ctx.In("scale").VariableWithValue("s", float64(1)).ValueGraph(in.X.Graph())
	return core.Outputs{"pred": graph.Mul(p, graph.ConvertDType(s, dtypes.Float32))}
}

// MixedGrouped follows the refusal's advice: the float64 parameter gets a group of its own.
type MixedGrouped struct{ Mixed }

func (*MixedGrouped) ParamGroup(kp []string) string {
	if kp[0] == "scale" {
		return "scale"
	}
	return "main"
}

// Empty puts a zero-size parameter in a group of its own.
type Empty struct{ coretest.Base }

func (*Empty) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	p := layers.Dense(ctx.In("dense_0"), in.X, true, 1)
	z := ctx.In("empty").VariableWithShape("z", shapes.Make(dtypes.Float32, 0)).ValueGraph(in.X.Graph())
	return core.Outputs{"pred": graph.Add(p, graph.ReduceAllSum(z))}
}

func (*Empty) ParamGroup(kp []string) string {
	if kp[0] == "empty" {
		return "empty"
	}
	return "main"
}

// NoParams has no trainable variable at all.
type NoParams struct{ coretest.Base }

func (*NoParams) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return core.Outputs{"pred": graph.ReduceSum(in.X, -1, 1)}
}

// TestGroupsOfOneDTypeWithElements: a group holds one dtype (its flat buffer is one array), so
// mixing float32 and float64 in a group is refused naming the parameter, both dtypes and the fix;
// the fix (a group per dtype) trains, the float64 parameter moving at its own dtype. A group whose
// parameters have no elements, and a model with no trainable parameter, are refused at setup.
func TestGroupsOfOneDTypeWithElements(t *testing.T) {
	coretest.WantErr(t, newErr(t, &Mixed{}, coretest.Data(t, 16)), "parameter [scale s] is Float64", `group "default" holds Float32`, "put it in its own group with ParamGroup")
	coretest.WantErr(t, newErr(t, &Empty{}, coretest.Data(t, 16)), `parameter group "empty" has no elements`)
	coretest.WantErr(t, newErr(t, &NoParams{}, coretest.Data(t, 16)), "the model has no trainable parameters")

	onBackends(t, func(t *testing.T, on []core.Option) {
		n := coretest.New(t, &MixedGrouped{}, append(coretest.GoOpts(nil, core.WithData(coretest.Data(t, 16))), on...)...)
		wantContains(t, "config report", n.ConfigReport(), "main (2 arrays, 5 values), scale (1 arrays, 1 values)")
		coretest.Train(t, n)
		p, err := n.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		var s *tensors.Tensor
		for k, v := range p {
			if strings.Contains(k, "scale") {
				s = v
			}
		}
		if s == nil || s.DType() != dtypes.Float64 {
			t.Fatalf("parameters %v: want the float64 scale", keys(p))
		}
		if v := tensors.MustCopyFlatData[float64](s)[0]; v == 1 {
			t.Errorf("the float64 parameter is still its initial 1 after training")
		}
	})
}

// Transposed returns one output with the batch on axis 1.
type Transposed struct{ coretest.Base }

func (*Transposed) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	p := layers.Dense(ctx.In("dense_0"), in.X, true, 1)
	return core.Outputs{"pred": p, "t": graph.Transpose(p, 0, 1)}
}

// Scalar returns a scalar output beside its prediction.
type Scalar struct{ coretest.Base }

func (*Scalar) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	p := layers.Dense(ctx.In("dense_0"), in.X, true, 1)
	return core.Outputs{"pred": p, "mean": graph.ReduceAllMean(p)}
}

// TestForwardOutputsAreBatchFirst: an output whose leading axis is not the batch (or a scalar,
// with no axis at all) cannot be padded and sliced by rows; every verb refuses it with an error
// naming the output, its shape and the fix, and nothing is trained.
func TestForwardOutputsAreBatchFirst(t *testing.T) {
	n := coretest.MustNew(t, &Transposed{}, coretest.Data(t, 24))
	want := []string{`Forward output "t" has shape [1 16]`, "its leading axis must be the batch (16)", "put the batch axis first"}
	coretest.WantErr(t, n.Train(), append([]string{"gradient program"}, want...)...)
	if n.Step() != 0 {
		t.Errorf("step %d after the refusal", n.Step())
	}
	_, err := n.Validate()
	coretest.WantErr(t, err, append([]string{"eval program"}, want...)...)
	x, _ := coretest.Synthetic(5, 3)
	_, err = n.Predict(prefetch.Batch{"x": x})
	coretest.WantErr(t, err, `Forward output "t" has shape [1 5]`, "put the batch axis first") // Predict runs the eval program when a split has its fields

	sc := coretest.MustNew(t, &Scalar{}, coretest.Data(t, 24))
	coretest.WantErr(t, sc.Train(), `Forward output "mean" is a scalar`, "reduce it in Loss or Metrics")
	if sc.Step() != 0 {
		t.Errorf("step %d after the refusal", sc.Step())
	}
}

// rewriteControl replaces the control state of the checkpoint at path.
func rewriteControl(t *testing.T, path, control string) {
	t.Helper()
	rec, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	rec.Control = json.RawMessage(control)
	if err := checkpoint.Write(path, rec); err != nil {
		t.Fatal(err)
	}
}

// TestResumeRefusesCorruptControlState: a checkpoint's control state (the early-stopping progress)
// that does not parse, or parses to a state early stopping never writes, refuses the resume naming
// the file (a control that does not parse, with early stopping off too); one recorded for another
// metric is reported and early stopping starts afresh.
func TestResumeRefusesCorruptControlState(t *testing.T) {
	es := core.WithEarlyStopping("val_loss", "min", 5, 0)
	dir := t.TempDir()
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2), es)...)
	coretest.Train(t, n)
	good, err := checkpoint.Read(n.LastCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	resume := func(control string) (*core.Nitro, *core.MemoryConsole, error) {
		t.Helper()
		rewriteControl(t, n.LastCheckpoint(), control)
		con := &core.MemoryConsole{}
		r, err := core.New(&coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(3), es, core.WithResume(n.LastCheckpoint()), core.WithConsole(con))...)
		return r, con, err
	}
	for _, c := range []struct {
		name, control string
		want          []string
	}{
		{"not an object", `[1, 2]`, []string{"checkpoint " + n.LastCheckpoint(), "control state"}},
		{"state not an object", `{"early_stopping": "seen"}`, []string{"checkpoint " + n.LastCheckpoint(), "early-stopping state"}},
		{"negative count", `{"early_stopping": {"metric": "val_loss", "mode": "min", "seen": true, "best": 1, "bad_epochs": -1}}`,
			[]string{"early-stopping state", "not a state EarlyStopping writes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := resume(c.control)
			coretest.WantErr(t, err, c.want...)
		})
	}
	// With early stopping off, a control state that does not parse is still a damaged record.
	rewriteControl(t, n.LastCheckpoint(), `[1, 2]`)
	_, err = core.New(&coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(3), core.WithResume(n.LastCheckpoint()))...)
	coretest.WantErr(t, err, "checkpoint "+n.LastCheckpoint(), "control state")

	r, con, err := resume(`{"early_stopping": {"metric": "val_mse", "mode": "min", "seen": true, "best": 1, "bad_epochs": 4}}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch() != 2 || !slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "early stopping starts afresh") }) {
		t.Errorf("epoch %d, notices %q: want the resume, and the other metric's state reported as dropped", r.Epoch(), con.Notices)
	}
	rewriteControl(t, n.LastCheckpoint(), string(good.Control))
	if _, _, err := resume(string(good.Control)); err != nil {
		t.Errorf("the untouched control state %s: %v", good.Control, err)
	}
}

// TestWithResumeFromAPath: WithResume(path) from Go continues from that very checkpoint (here an
// older one than the newest, into another run dir), ending bit for bit where the uninterrupted
// run ends; a run directory means its newest checkpoint; a path with no checkpoint is an error
// naming it.
func TestWithResumeFromAPath(t *testing.T) {
	straight := coretest.New(t, &Dropped{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3))...)
	coretest.Train(t, straight)
	dir := t.TempDir()
	every := func(dir string) core.Option { return core.WithCheckpointer(must(checkpoint.NewEveryN(1, dir, nil))) }
	first := coretest.New(t, &Dropped{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(3), every(dir))...)
	coretest.Train(t, first)
	entries := manifest(t, dir)
	if len(entries) != 3 || entries[0].Epoch != 1 {
		t.Fatalf("manifest %+v: want the checkpoints of epochs 1 to 3", entries)
	}
	older := filepath.Join(dir, entries[0].File)

	other := t.TempDir()
	r := coretest.New(t, &Dropped{}, coretest.CkptOpts(other, core.WithData(shuffled(t)), core.WithMaxEpochs(3), every(other), core.WithResume(older))...)
	if r.Epoch() != 1 || r.Step() != entries[0].Step {
		t.Fatalf("resumed from %s at epoch %d step %d, want epoch 1 step %d", older, r.Epoch(), r.Step(), entries[0].Step)
	}
	coretest.Train(t, r)
	sameBits(t, "parameters resumed from the epoch-1 checkpoint", flatParams(t, r), flatParams(t, straight))

	d := coretest.New(t, &Dropped{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3), core.WithResume(dir))...)
	if d.Epoch() != 3 || d.Step() != straight.Step() {
		t.Errorf("WithResume(run dir): epoch %d step %d, want the newest checkpoint's 3 and %d", d.Epoch(), d.Step(), straight.Step())
	}
	sameBits(t, "parameters resumed from the run dir", flatParams(t, d), flatParams(t, straight))

	missing := filepath.Join(t.TempDir(), "nope.safetensors")
	coretest.WantErr(t, newErr(t, &Dropped{}, shuffled(t), core.WithResume(missing)), "resume", missing)
	emptyDir := t.TempDir()
	coretest.WantErr(t, newErr(t, &Dropped{}, shuffled(t), core.WithResume(emptyDir)), emptyDir, "holds no checkpoint")
	if _, err := os.Stat(filepath.Join(other, checkpoint.ManifestName)); err != nil {
		t.Errorf("the resumed run wrote no manifest into its own run dir: %v", err)
	}
}
