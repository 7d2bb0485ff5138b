package integration_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
)

// A ratio only counts when the sides it compares trained alike, so after the timed rounds every
// training side is scored on one batch none of them trained on: its loss and its accuracy (the
// share of argmax predictions equal to the label, over every prediction of the batch). The bound
// is loose on purpose: the sides start from different initial values (and JAX draws its own
// training data), so their models differ; a side off by more than sampling noise allows has
// trained something else.
const (
	famHeldOutSeed = 11   // the training rows are drawn from seed 7
	famAccTolAbs   = 0.05 // least accuracy tolerance, absolute
	famAccTolSigma = 3    // binomial standard deviations of the median accuracy
)

// famScore is what a side's parameters reached on the held-out batch.
type famScore struct {
	loss, acc float64
	off       bool // its accuracy is outside the tolerance around the sides' median
}

// famHeldOut is the held-out batch and the one GoMLX program that scores every Go side's
// parameters on it (the parameters are its inputs, so each side is scored by the same program).
type famHeldOut struct {
	f    *family
	x, y *tensors.Tensor
	ctx  *context.Context
	exec *context.Exec
	n    int // variables the scorer was built with
}

func newFamHeldOut(r *backend.Resolved, f *family) (*famHeldOut, error) {
	x, y := newFamBatches(f, famHeldOutSeed, f.batch).batch(0, f.batch)
	h := &famHeldOut{f: f, x: x, y: y}
	h.ctx = context.New()
	var err error
	h.exec, err = context.NewExec(r.Backend, h.ctx.Checked(false), func(ctx *context.Context, x, y *graph.Node) []*graph.Node {
		logits := f.model(ctx, x)
		pred := graph.ArgMax(logits, -1, y.DType())
		acc := graph.ReduceAllMean(graph.ConvertDType(graph.Equal(pred, y), dtypes.Float32))
		return []*graph.Node{f.loss(logits, y), acc}
	})
	if err != nil {
		return nil, fmt.Errorf("the held-out scorer of %s: %w", f.name, err)
	}
	return h, nil
}

// predictions is the number of predictions the accuracy averages over.
func (h *famHeldOut) predictions() int { return h.y.Shape().Size() }

// score runs the scorer on params (keypath -> value, as core.Nitro.Parameters names them). The
// first call creates the variables; later calls must name exactly the same ones, so a side whose
// parameters do not fit the family's model is an error, never a model half of fresh values.
func (h *famHeldOut) score(params map[string]*tensors.Tensor) (famScore, error) {
	first := h.n == 0
	for kp, given := range params {
		// The scorer keeps a copy: setting a variable's value frees its last one, which must never
		// be a side's live parameter.
		t, err := given.LocalClone()
		if err != nil {
			return famScore{}, fmt.Errorf("held-out scorer: copying parameter %q: %w", kp, err)
		}
		c, name := ctxAt(h.ctx, kp)
		if first {
			c.VariableWithValue(name, t)
			continue
		}
		v := h.ctx.InspectVariable(c.Scope(), name)
		if v == nil {
			return famScore{}, fmt.Errorf("held-out scorer: parameter %q is not one of the family's %d", kp, h.n)
		}
		if err := v.SetValue(t); err != nil {
			return famScore{}, fmt.Errorf("held-out scorer: parameter %q: %w", kp, err)
		}
	}
	if !first && len(params) != h.n {
		return famScore{}, fmt.Errorf("held-out scorer: %d parameters given, the family has %d", len(params), h.n)
	}
	out, err := h.exec.Exec(h.x, h.y)
	if err != nil {
		return famScore{}, err
	}
	if first {
		// Tracing the model found every variable it reads; one it created was missing from params.
		for range h.ctx.IterVariables() {
			h.n++
		}
		if h.n != len(params) {
			return famScore{}, fmt.Errorf("held-out scorer: the model reads %d variables, %d parameters were given", h.n, len(params))
		}
	}
	loss, okL := out[0].Value().(float32)
	acc, okA := out[1].Value().(float32)
	if !okL || !okA {
		return famScore{}, fmt.Errorf("held-out scorer returned %T and %T, want float32", out[0].Value(), out[1].Value())
	}
	return famScore{loss: float64(loss), acc: float64(acc)}, nil
}

// ctxAt is the context of a keypath's scope ("block_0/q/weights": ctx/block_0/q) and its name.
func ctxAt(ctx *context.Context, kp string) (*context.Context, string) {
	parts := strings.Split(kp, "/")
	for _, p := range parts[:len(parts)-1] {
		ctx = ctx.In(p)
	}
	return ctx, parts[len(parts)-1]
}

// ctxParams is the trainable variables of a context by keypath (the optimizer's state is not
// trainable), as core.Nitro.Parameters names them.
func ctxParams(ctx *context.Context) (map[string]*tensors.Tensor, error) {
	out := map[string]*tensors.Tensor{}
	for v := range ctx.IterVariables() {
		if !v.Trainable {
			continue
		}
		t, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.ScopeAndName(), err)
		}
		out[strings.TrimLeft(v.Scope()+"/"+v.Name(), "/")] = t
	}
	return out, nil
}

// writeFile writes the held-out batch for the JAX peer: x's values then y's, little-endian,
// row-major, with nothing around them (the peer knows the family's shapes and checks the size).
func (h *famHeldOut) writeFile(dir string) (string, error) {
	path := filepath.Join(dir, "heldout-"+h.f.name+"-"+strconv.Itoa(h.f.batch)+".bin")
	fh, err := os.Create(path)
	if err != nil {
		return "", err
	}
	var werr error
	for _, t := range []*tensors.Tensor{h.x, h.y} {
		if err := t.ConstFlatData(func(flat any) { werr = binary.Write(fh, binary.LittleEndian, flat) }); err != nil || werr != nil {
			_ = fh.Close()
			return "", fmt.Errorf("writing the held-out batch: %v %v", err, werr)
		}
	}
	if err := fh.Close(); werr == nil {
		werr = err
	}
	return path, werr
}

// eval asks the JAX peer to score its parameters on the held-out batch in path.
func (p *famPeer) eval(path string) (famScore, error) {
	if _, err := io.WriteString(p.in, "eval "+path+"\n"); err != nil {
		return famScore{}, err
	}
	kv := p.read("eval_loss")
	loss, err1 := strconv.ParseFloat(kv["eval_loss"], 64)
	acc, err2 := strconv.ParseFloat(kv["eval_acc"], 64)
	if err1 != nil || err2 != nil {
		return famScore{}, fmt.Errorf("JAX peer's eval answer %v: want eval_loss= and eval_acc= numbers", kv)
	}
	return famScore{loss: loss, acc: acc}, nil
}

// famAccTol is the accuracy tolerance around the sides' median accuracy over n predictions.
func famAccTol(median float64, n int) float64 {
	return math.Max(famAccTolAbs, famAccTolSigma*math.Sqrt(median*(1-median)/float64(n)))
}

// scoreSides scores every training side of a family on the held-out batch (the gradient-only
// loop trains nothing and is left out) and flags the ones whose accuracy is off the others'.
func scoreSides(b *testing.B, r *backend.Resolved, res *famResult, peer *famPeer) {
	h, err := newFamHeldOut(r, res.f)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range res.sides {
		var sc famScore
		var err error
		switch {
		case s.params != nil:
			var ps map[string]*tensors.Tensor
			if ps, err = s.params(); err == nil {
				sc, err = h.score(ps)
			}
		case !s.isGo && peer != nil:
			var path string
			if path, err = h.writeFile(b.TempDir()); err == nil {
				sc, err = peer.eval(path)
			}
		default:
			continue
		}
		if err != nil {
			b.Fatalf("%s, %s: scoring on the held-out batch: %v", res.f.name, s.name, err)
		}
		if math.IsNaN(sc.loss) || math.IsInf(sc.loss, 0) {
			b.Errorf("%s, %s: held-out loss %v: the side diverged", res.f.name, s.name, sc.loss)
		}
		s.score = &sc
	}
	res.heldOutN = h.predictions()
	flagOffSides(res)
}

// flagOffSides sets the median of the scored sides' accuracies, the tolerance around it over
// res.heldOutN predictions, and marks the sides outside it.
func flagOffSides(res *famResult) {
	var accs []float64
	for _, s := range res.sides {
		if s.score != nil {
			accs = append(accs, s.score.acc)
		}
	}
	res.accMedian = median(accs)
	res.accTol = famAccTol(res.accMedian, res.heldOutN)
	for _, s := range res.sides {
		if s.score != nil && math.Abs(s.score.acc-res.accMedian) > res.accTol {
			s.score.off = true
			res.accOff = append(res.accOff, s.name)
		}
	}
}

// String is the score as the family's table prints it; "-" for a side that trains nothing.
func (s *famScore) String() string {
	if s == nil {
		return "-"
	}
	flag := ""
	if s.off {
		flag = "  OFF: trained something else"
	}
	return fmt.Sprintf("%.4f, %.3f%s", s.loss, s.acc, flag)
}

// heldOutLine says what the held-out scores were checked against, and which sides missed.
func (res *famResult) heldOutLine() string {
	verdict := "every side within it"
	if len(res.accOff) > 0 {
		verdict = "OFF: " + strings.Join(res.accOff, ", ") + " (a ratio against an OFF side compares different computations)"
	}
	return fmt.Sprintf("held-out batch (seed %d, %d predictions): median accuracy %.3f, tolerance ±%.3f (max of %.2f and %g binomial sd): %s",
		famHeldOutSeed, res.heldOutN, res.accMedian, res.accTol, famAccTolAbs, float64(famAccTolSigma), verdict)
}

// accSummary is the summary's held-out column: each training side's accuracy in table order,
// then whether all are within the tolerance.
func (res *famResult) accSummary() string {
	var parts []string
	for _, s := range []*famSide{res.two, res.fused, res.gomlx, res.jx} {
		if s != nil && s.score != nil {
			parts = append(parts, fmt.Sprintf("%.3f", s.score.acc))
		}
	}
	if len(res.accOff) > 0 {
		return strings.Join(parts, " ") + " (OFF: " + strings.Join(res.accOff, ", ") + ")"
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" (within ±%.3f)", res.accTol)
}
