package gpt_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/cmd/examples/gpt"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// TestTrainTiny trains the tiny preset (2 blocks of width 32, 60 steps of 8 windows of 32 bytes
// of the Go source tree) on the XLA plugin and checks that it learned: the val loss falls below
// ln 256, a uniform guess over bytes, and below its value before training, with bpb the loss in
// bits. The built model holds ParamCount parameters, weight decay spares all but the weight
// matrices, and a position's logits do not depend on later tokens (the mask is causal).
func TestTrainTiny(t *testing.T) {
	prereq.Plugin(t)
	e, err := markers.FromPreset[gpt.GPT]("tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	n, err := core.New(e, core.WithPreset("tiny"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithRunDir(t.TempDir()), core.WithBackend("xla"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	h := n.History()
	if len(h) != 3 || h[0].Step != 20 || n.Step() != 60 {
		t.Fatalf("tiny reports %d periods, the first at step %d, and ends at step %d: want 3 (ValEvery 20), 20, MaxSteps 60", len(h), h[0].Step, n.Step())
	}
	last := h[len(h)-1].Val
	t.Logf("tiny preset on %s: val loss %.4f before training, %.4f after %d steps (%.3f bits per byte, accuracy %.3f); %.1fs in all",
		n.Backend().Name, before["loss"], last["val_loss"], n.Step(), last["val_bpb"], last["val_accuracy"], time.Since(start).Seconds())
	if !(last["val_loss"] < math.Log(gpt.Vocab)) || !(last["val_loss"] < before["loss"]) {
		t.Errorf("val loss %.4f after training (%.4f before): want below ln 256 = %.4f and below the start", last["val_loss"], before["loss"], math.Log(gpt.Vocab))
	}
	if d := math.Abs(last["val_bpb"] - last["val_loss"]/math.Ln2); d > 1e-4 {
		t.Errorf("val_bpb %v, val_loss/ln 2 %v: differ by %g", last["val_bpb"], last["val_loss"]/math.Ln2, d)
	}

	params, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	count, decayed := 0, 0
	for name, p := range params {
		count += p.Shape().Size()
		path := strings.Split(name, "/")
		if !e.NoDecay(path, p.Shape()) {
			decayed++
			if p.Rank() != 2 || !strings.Contains(name, "block_") {
				t.Errorf("%s %s is decayed: want the blocks' weight matrices only", name, p.Shape())
			}
		}
	}
	if count != e.ParamCount() {
		t.Errorf("the tiny model holds %d parameters, ParamCount says %d", count, e.ParamCount())
	}
	if want := 4 * e.Layers; decayed != want {
		t.Errorf("%d arrays decayed, want %d (qkv, proj, fc_1, fc_2 per block)", decayed, want)
	}

	// Causality: two windows equal but for their last token give the same logits before it.
	tok := make([]int32, 2*e.Context)
	for i := range e.Context {
		tok[i], tok[e.Context+i] = int32('a'+i%26), int32('a'+i%26)
	}
	tok[2*e.Context-1] = '!'
	p, err := n.Predict(prefetch.Batch{"tokens": tensors.FromFlatDataAndDimensions(tok, 2, e.Context)})
	if err != nil {
		t.Fatal(err)
	}
	logits := tensors.MustCopyFlatData[float32](p["logits"])
	row := e.Context * gpt.Vocab
	early := row - gpt.Vocab // positions 0..Context-2
	if !slices.Equal(logits[:early], logits[row:row+early]) {
		t.Error("changing the last token changed the logits of earlier positions: the attention sees the future")
	}
	if slices.Equal(logits[early:row], logits[row+early:]) {
		t.Error("changing the last token left its own position's logits unchanged")
	}
}

// TestLongerThanContext: Forward refuses more tokens than Context by name (traced on the pure-Go
// backend, outside core).
func TestLongerThanContext(t *testing.T) {
	e, err := markers.FromPreset[gpt.GPT]("tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	be, err := backend.Resolve("go")
	if err != nil {
		t.Fatal(err)
	}
	long := tensors.FromFlatDataAndDimensions(make([]int32, e.Context+1), 1, e.Context+1)
	_, err = context.ExecOnceN(be.Backend, context.New(), func(ctx *context.Context, tokens *graph.Node) []*graph.Node {
		return []*graph.Node{e.Forward(ctx, gpt.Inputs{Tokens: tokens})["logits"]}
	}, long)
	if err == nil || !strings.Contains(err.Error(), "more than Context = 32 positions") {
		t.Errorf("Forward on %d tokens (Context %d): error %v, want one saying more than Context", e.Context+1, e.Context, err)
	}
}

// TestDropout trains the tiny preset for 30 steps with Dropout 0.3 and with none: dropout changes
// the training loss (it is active in training, and costs some fit), training still learns, and
// prediction does not drop (two predictions of one batch agree).
func TestDropout(t *testing.T) {
	prereq.Plugin(t)
	train := func(rate float64) (*core.Nitro, *gpt.GPT, float64) {
		e, err := markers.FromPreset[gpt.GPT]("tiny", map[string]any{"Dropout": rate, "MaxSteps": 30, "ValEvery": 30})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		n, err := core.New(e, core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithRunDir(t.TempDir()), core.WithBackend("xla"))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		ep := n.History()[0]
		t.Logf("Dropout %v: train loss %.4f, val loss %.4f", rate, ep.TrainLoss, ep.Val["val_loss"])
		if !(ep.Val["val_loss"] < math.Log(gpt.Vocab)) {
			t.Errorf("Dropout %v: val loss %v after an epoch: want below ln 256", rate, ep.Val["val_loss"])
		}
		return n, e, ep.TrainLoss
	}
	_, _, plain := train(0)
	n, e, dropped := train(0.3)
	if dropped == plain {
		t.Errorf("train loss %v with Dropout 0.3 and without: dropout is not active in training", plain)
	}
	b := prefetch.Batch{"tokens": tensors.FromFlatDataAndDimensions(make([]int32, 2*e.Context), 2, e.Context)}
	var got [2][]float32
	for i := range got {
		p, err := n.Predict(b)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = tensors.MustCopyFlatData[float32](p["logits"])
	}
	if !slices.Equal(got[0], got[1]) {
		t.Error("two predictions of one batch differ: dropout is active outside training")
	}
}

// TestParamCountGPT2 counts the gpt2 preset's parameters without building it: GPT-2 small's
// 124,439,808 less its 50,257-token embedding plus a 256-byte one, 86,039,040.
func TestParamCountGPT2(t *testing.T) {
	e, err := markers.FromPreset[gpt.GPT]("gpt2", nil)
	if err != nil {
		t.Fatal(err)
	}
	const gpt2Small, gpt2Vocab = 124_439_808, 50_257
	want := gpt2Small - gpt2Vocab*768 + gpt.Vocab*768
	if got := e.ParamCount(); got != want || got != 86_039_040 {
		t.Fatalf("gpt2 preset: ParamCount %d, want %d", got, want)
	}
	for _, preset := range []string{"tiny", "small", "gpt2"} {
		p, err := markers.FromPreset[gpt.GPT](preset, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("preset %-5s: %d layers, %d heads, width %d, context %d: %d parameters", preset, p.Layers, p.Heads, p.Dim, p.Context, p.ParamCount())
	}
}

// TestFieldsAreChecked: out-of-range fields are refused together, each by name, before any data
// is read.
func TestFieldsAreChecked(t *testing.T) {
	e, err := markers.FromPreset[gpt.GPT]("tiny", map[string]any{"Dim": 30, "Heads": 4, "Val": 0.0, "Dropout": 1.0, "Column": "text"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.BuildData(dist.Single())
	if err == nil {
		t.Fatal("BuildData accepted Dim 30, Heads 4, Val 0, Dropout 1 and a Column without Corpus")
	}
	for _, w := range []string{"Dim = 30 does not divide by Heads = 4", "Val = 0: want in (0, 1)", "Dropout = 1: want in [0, 1)", `Column = "text" needs Corpus`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}

	missing := t.TempDir() + "/no-such-corpus"
	e, err = markers.FromPreset[gpt.GPT]("tiny", map[string]any{"Corpus": missing})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = e.BuildData(dist.Single()); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "the field Corpus") {
		t.Errorf("BuildData on a missing corpus: error %v, want one naming the path and the field Corpus", err)
	}
}
