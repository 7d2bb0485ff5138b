package gpt

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/prefetch"
)

// Text generation. The model generates through a decode step: one program that takes one token
// [1, 1] and its position, appends the token's keys and values to each block's cache
// ([1, Heads, Context, Dim/Heads], a variable of the step's own context, so it stays on the
// device between calls and its buffer is donated to the update), attends over the cached
// positions 0..pos with the later ones masked, and returns the next token's logits [1, 256]. A
// Step costs one position, not the whole window. The prompt goes through the same step, one
// position at a time (one program to compile, and a prompt is at most Context bytes).
//
// Reset only moves the position back to 0: the cache's stale entries past pos are masked, and
// each is overwritten before a later step can see it.
//
// The uncached stepper runs Forward itself over the window, zero-padded to Context (the mask is
// causal, so the padding changes nothing before it) and returns the logits at pos: the reference
// the cached step is tested against, and what a step costs without a cache.

// GenerateSpecs is the batch Forward reads, declared so that a model rebuilt for sampling needs
// no data: one token per row (any length up to Context traces the same weights).
func (e *GPT) GenerateSpecs() []prefetch.FieldSpec {
	return []prefetch.FieldSpec{{Name: "tokens", DType: dtypes.Int32, Shape: []int{1}}}
}

// Stepper is the model's cached decode step over the view's weights, on its backend. It copies
// the weights when called, so it stays valid after the view's call returns; it builds its
// program on its first Step.
func (e *GPT) Stepper(m *core.ModelView) (generate.Stepper, error) {
	be, ctx, err := e.stepContext(m)
	if err != nil {
		return nil, err
	}
	exec, err := context.NewExec(be, ctx.Reuse(), e.decodeStep)
	if err != nil {
		return nil, fmt.Errorf("gpt: the decode step: %w", err)
	}
	return &stepper{e: e, run: exec.Exec}, nil
}

// ExportStep is the same decode step for nitro export (export.StepExporter): the weights and the
// zero caches in a fresh context, and the step, so the bundle's program is the one Stepper runs
// and a served GPT continues a prompt as nitro sample does.
func (e *GPT) ExportStep(m *core.ModelView) (*context.Context, func(ctx *context.Context, token, pos *graph.Node) *graph.Node, int, error) {
	_, ctx, err := e.stepContext(m)
	if err != nil {
		return nil, nil, 0, err
	}
	return ctx, e.decodeStep, e.Context, nil
}

// stepContext is weightsContext with each block's key/value cache beside the weights, zero.
func (e *GPT) stepContext(m *core.ModelView) (backends.Backend, *context.Context, error) {
	be, ctx, err := e.weightsContext(m)
	if err != nil {
		return nil, nil, err
	}
	dh := e.Dim / e.Heads
	for i := range e.Layers {
		c := ctx.InAbsPath(cacheScope(i))
		for _, name := range []string{"keys", "values"} {
			c.VariableWithValue(name, tensors.FromShape(shapes.Make(dtypes.Float32, 1, e.Heads, e.Context, dh))).Trainable = false
		}
	}
	return be, ctx, nil
}

// UncachedStepper runs Forward over the whole window at every Step: the same logits as Stepper,
// at the cost of Context positions per token.
func (e *GPT) UncachedStepper(m *core.ModelView) (generate.Stepper, error) {
	be, ctx, err := e.weightsContext(m)
	if err != nil {
		return nil, err
	}
	exec, err := context.NewExec(be, ctx.Reuse(), func(ctx *context.Context, tokens, pos *graph.Node) *graph.Node {
		logits := e.Forward(ctx, Inputs{Tokens: tokens})["logits"] // [1, Context, 256]
		zero := graph.ScalarZero(tokens.Graph(), dtypes.Int32)
		return graph.Reshape(graph.DynamicSlice(logits, []*graph.Node{zero, pos, zero}, []int{1, 1, Vocab}), 1, Vocab)
	})
	if err != nil {
		return nil, fmt.Errorf("gpt: the uncached step: %w", err)
	}
	s := &stepper{e: e, window: make([]int32, e.Context)}
	s.run = func(args ...any) ([]*tensors.Tensor, error) {
		s.window[args[1].(int32)] = args[0].([][]int32)[0][0]
		return exec.Exec([][]int32{s.window}, args[1])
	}
	return s, nil
}

// stepper is either decode step behind generate's interface: run takes the token [1, 1] and the
// position and returns the logits [1, 256].
type stepper struct {
	e      *GPT
	run    func(args ...any) ([]*tensors.Tensor, error)
	next   int     // the position the next Step must be at
	window []int32 // the uncached stepper's tokens, zero past next
}

var _ generate.Stepper = (*stepper)(nil)

func (s *stepper) Context() int { return s.e.Context }

func (s *stepper) Reset() error {
	s.next = 0
	clear(s.window)
	return nil
}

func (s *stepper) Step(token, pos int) (logits []float32, err error) {
	if token < 0 || token >= Vocab {
		return nil, fmt.Errorf("gpt: token %d: want a byte, 0..%d", token, Vocab-1)
	}
	if pos != s.next || pos >= s.e.Context {
		return nil, fmt.Errorf("gpt: Step at position %d: want %d, below Context = %d (Reset starts again at 0)", pos, s.next, s.e.Context)
	}
	defer func() { // a failing compile or run in GoMLX may panic
		if r := recover(); r != nil {
			err = fmt.Errorf("gpt: the decode step at position %d: %v", pos, r)
		}
	}()
	out, err := s.run([][]int32{{int32(token)}}, int32(pos))
	if err != nil {
		return nil, fmt.Errorf("gpt: the decode step at position %d: %w", pos, err)
	}
	s.next++
	logits = tensors.MustCopyFlatData[float32](out[0])
	out[0].FinalizeAll() // its device buffer is free now, not at the next GC
	return logits, nil
}

// weightsContext is a fresh context holding the view's parameters, each under the scope and name
// Forward gave it, so Forward and the decode step read them as training did. It refuses a view
// of another model's weights by the name it misses.
func (e *GPT) weightsContext(m *core.ModelView) (backends.Backend, *context.Context, error) {
	if err := e.check(); err != nil {
		return nil, nil, err
	}
	ws, err := m.Weights()
	if err != nil {
		return nil, nil, err
	}
	ctx := context.New()
	for _, w := range ws {
		keypath, ok := strings.CutPrefix(w.Name, "param/")
		if !ok {
			continue // layer state: the model has none of its own
		}
		scope, name := "", keypath
		if i := strings.LastIndex(keypath, "/"); i >= 0 {
			scope, name = keypath[:i], keypath[i+1:]
		}
		t := tensors.FromShape(shapes.Make(w.DType, w.Shape...))
		if err := t.MutableBytes(func(b []byte) { copy(b, w.Data) }); err != nil {
			return nil, nil, fmt.Errorf("gpt: weight %s: %w", w.Name, err)
		}
		ctx.InAbsPath(context.RootScope+scope).VariableWithValue(name, t)
	}
	for _, want := range []string{"/token/embeddings", "/position/embeddings", "/ln_f/"} {
		if !hasVariable(ctx, want) {
			return nil, nil, fmt.Errorf("gpt: the model's weights hold no %s: they are not a GPT's (experiment %s)", want, m.TypeName())
		}
	}
	be, _, _ := m.Backend()
	return be, ctx, nil
}

// hasVariable reports whether ctx holds a variable whose scope and name start with prefix.
func hasVariable(ctx *context.Context, prefix string) bool {
	found := false
	ctx.EnumerateVariables(func(v *context.Variable) {
		found = found || strings.HasPrefix(context.JoinScope(v.Scope(), v.Name()), prefix)
	})
	return found
}

// cacheScope is block i's key/value cache's scope: apart from the weights', so no checkpoint
// name can collide with it.
func cacheScope(i int) string { return fmt.Sprintf("/decode_cache/block_%d", i) }

// decodeStep is Forward for one token at position pos, with each block's keys and values of
// the earlier positions read from its cache: token [1, 1] int32, pos a scalar int32; the next
// token's logits [1, 256]. Its blocks are Forward's, but for the attention (no dropout: the step's
// context is not training).
func (e *GPT) decodeStep(ctx *context.Context, token, pos *graph.Node) *graph.Node {
	g := token.Graph()
	zero := graph.ScalarZero(g, dtypes.Int32)
	wte := ctx.In("token").VariableWithShape("embeddings", shapes.Make(dtypes.Float32, Vocab, e.Dim)).ValueGraph(g)
	wpe := ctx.In("position").VariableWithShape("embeddings", shapes.Make(dtypes.Float32, e.Context, e.Dim)).ValueGraph(g)
	x := graph.Gather(wte, graph.ExpandAxes(token, -1))                                                       // [1, 1, Dim]
	x = graph.Add(x, graph.ExpandAxes(graph.DynamicSlice(wpe, []*graph.Node{pos, zero}, []int{1, e.Dim}), 0)) // position pos
	x = e.blocks(ctx, x, func(att *context.Context, i int, h *graph.Node) *graph.Node {
		return e.cachedAttention(att, ctx.InAbsPath(cacheScope(i)), h, pos)
	})
	return graph.Reshape(graph.Einsum("btd,vd->btv", x, wte), 1, Vocab)
}

// cachedAttention is attention's counterpart for one query x [1, 1, Dim] at position pos: its
// key and value go into the cache at pos, and it attends over positions 0..pos of the cache.
func (e *GPT) cachedAttention(ctx, cache *context.Context, x, pos *graph.Node) *graph.Node {
	g, dh := x.Graph(), e.Dim/e.Heads
	qkv := graph.Reshape(linear(ctx.In("qkv"), x, 3*e.Dim, initStd), 1, 1, 3, e.Heads, dh)
	parts := graph.Split(qkv, 2, 3)
	// [1, 1, Heads, dh] and [1, Heads, 1, dh] are one layout: the position axis has size 1.
	q, k, v := graph.Reshape(parts[0], 1, e.Heads, 1, dh), graph.Reshape(parts[1], 1, e.Heads, 1, dh), graph.Reshape(parts[2], 1, e.Heads, 1, dh)
	zero := graph.ScalarZero(g, dtypes.Int32)
	at := []*graph.Node{zero, zero, pos, zero}
	cacheShape := shapes.Make(dtypes.Float32, 1, e.Heads, e.Context, dh)
	keysVar, valuesVar := cache.VariableWithShape("keys", cacheShape), cache.VariableWithShape("values", cacheShape)
	keys := graph.DynamicUpdateSlice(keysVar.ValueGraph(g), k, at)
	values := graph.DynamicUpdateSlice(valuesVar.ValueGraph(g), v, at)
	keysVar.SetValueGraph(keys)
	valuesVar.SetValueGraph(values)

	logits := graph.MulScalar(graph.Einsum("bhqd,bhkd->bhqk", q, keys), 1/math.Sqrt(float64(dh))) // [1, Heads, 1, Context]
	seen := graph.LessOrEqual(graph.Iota(g, shapes.Make(dtypes.Int32, e.Context), 0), graph.BroadcastToDims(pos, e.Context))
	seen = graph.BroadcastToDims(graph.Reshape(seen, 1, 1, 1, e.Context), 1, e.Heads, 1, e.Context)
	w := graph.Softmax(graph.Where(seen, logits, graph.Scalar(g, logits.DType(), -1e9)), -1)
	return graph.Reshape(graph.Einsum("bhqk,bhkd->bhqd", w, values), 1, 1, e.Dim)
}
