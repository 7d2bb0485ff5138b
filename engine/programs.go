package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/backends/notimplemented"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/mesh"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/pjrthook"
)

// program is a compiled graph plus what its outputs mean. It is what the compile cache stores, so
// everything a caller needs to read the outputs must be here, not in the building closure: every
// output's name, as its builder declared it (outputs.go).
type program struct {
	kind    string // the cache key's kind, naming the program in errors
	g       *graph.Graph
	inputs  []compilecache.Input
	outputs []string       // every output's name, in output order
	at      map[string]int // output name -> index
	// traced is the fingerprint of the graph the program was compiled from (Host fields zero,
	// constants by value). A handle that gets the program from the cache traces its own
	// experiment and compares, so a program is used only by an experiment that traces to it.
	traced string
}

// signature is a program's ordered parameter list; building and the cache key both derive from it.
type signature []compilecache.Input

func (s *signature) add(name string, dtype string, dims []int) {
	*s = append(*s, compilecache.Input{Name: name, DType: dtype, Shape: append([]int(nil), dims...)})
}

// params creates the graph parameters in signature order. Inputs that are context variables
// (layer state) are created by the variable itself, so that the user's layers, which read
// variables through the context, see exactly these nodes; parameters are bound to their views
// afterwards (modelNodes).
func (s signature) params(g *graph.Graph, vars map[string]*context.Variable) map[string]*graph.Node {
	nodes := make(map[string]*graph.Node, len(s))
	for _, in := range s {
		batch := strings.HasPrefix(in.Name, "batch/") // over a mesh, split by rows; the rest replicated
		if v, ok := vars[in.Name]; ok {
			if err := v.SetShardingSpec(mesh.Spec(g, batch)); err != nil {
				panic(err)
			}
			nodes[in.Name] = v.ValueGraph(g)
			continue
		}
		nodes[in.Name] = mesh.Parameter(g, in.Name, shapes.Make(dtypeOf(in.DType), in.Shape...), batch)
	}
	return nodes
}

// modelInputs lists parameters (per group its segments and its shared arrays' offsets), layer state
// and Device fields, then the routed batch fields.
func (e *Engine) modelInputs(width int, keys []string) signature {
	var s signature
	for _, g := range e.groups {
		g.addSegmentInputs(&s, paramsInput)
		g.addOffsetInputs(&s)
	}
	for _, v := range e.stateVars {
		s.add(layerInput(v.ScopeAndName()), v.DType().String(), v.Shape().Dimensions)
	}
	for _, name := range e.devNames {
		t := e.dev[name]
		s.add("device/"+name, t.DType().String(), t.Shape().Dimensions)
	}
	for _, k := range keys {
		fs := e.fieldShapes[k]
		s.add("batch/"+k, fs.DType, append([]int{width}, fs.Row...))
	}
	return s
}

// modelNodes creates a model program's inputs in signature order and binds every trainable
// variable to its view of its group's flat parameters (bindParams), returned per group.
func (e *Engine) modelNodes(g *graph.Graph, sig signature) (map[string]*graph.Node, [][]*graph.Node) {
	nodes := sig.params(g, e.varInputs)
	return nodes, e.bindParams(g, nodes)
}

// bindModel binds Device fields on a copy of src to their parameter nodes; it returns the view
// traced hooks are called on.
func (e *Engine) bindModel(g *graph.Graph, nodes map[string]*graph.Node, src any) any {
	dev := map[string]*graph.Node{}
	for _, name := range e.devNames {
		dev[name] = nodes["device/"+name]
	}
	view, err := markers.BindDevice(src, dev)
	if err != nil {
		panic(err)
	}
	return view
}

func batchNodes(nodes map[string]*graph.Node, keys []string) map[string]*graph.Node {
	b := make(map[string]*graph.Node, len(keys))
	for _, k := range keys {
		b[k] = nodes["batch/"+k]
	}
	return b
}

// callForward runs Forward on the view and asserts every output leaf is an array with the batch
// on its leading axis, before anything slices it.
func (e *Engine) callForward(view any, batch map[string]*graph.Node, width int) map[string]*graph.Node {
	out := e.hooks.Forward(view, e.ctx.Reuse(), batch)
	if len(out) == 0 {
		panic(fmt.Errorf("Forward returned no outputs: return named outputs, e.g. core.Outputs{\"logits\": logits}"))
	}
	for _, name := range sortedKeys(out) {
		o := out[name]
		if o == nil {
			panic(fmt.Errorf("Forward output %q is nil", name))
		}
		if o.Rank() == 0 {
			panic(fmt.Errorf("Forward output %q is a scalar: an output has no batch axis to slice; reduce it in Loss or Metrics instead of returning it from Forward", name))
		}
		if d := o.Shape().Dimensions[0]; d != width {
			panic(fmt.Errorf("Forward output %q has shape %v: its leading axis must be the batch (%d); put the batch axis first", name, o.Shape().Dimensions, width))
		}
	}
	return out
}

// memo returns this engine's program for id, asking the compile cache once. Everything in a key
// other than the id (experiment, GraphConst values, hooks, layout, device shapes, accum, clip) is
// fixed for an engine's life, so after the first lookup a step costs no key building at all.
func (e *Engine) memo(id string, get func() (*program, error)) (*program, error) {
	if p, ok := e.progs[id]; ok {
		return p, nil
	}
	p, err := get()
	if err != nil {
		return nil, err
	}
	if e.progs == nil {
		e.progs = map[string]*program{}
	}
	e.progs[id] = p
	return p, nil
}

// getProgram returns the cached program for key, building it on a miss: first the host-independence
// check (the program built from the real experiment and from the Host-zeroed view must agree), then
// the real build from the view, then compilation. A miss runs in the Compiling phase of its kind
// and restores the phase it interrupted. A program this handle did not compile (a hit, or another
// handle's compile it waited for) is checked against a trace of this handle's experiment: an equal
// key is not enough, since the key leaves Host values out by design.
func (e *Engine) getProgram(key compilecache.Key, build func(g *graph.Graph, src any) outList) (*program, error) {
	compiled := false
	v, lk, err := e.cache.Get(key, func() (p any, err error) {
		compiled = true
		err = e.compiling(compilingPhase(key.Kind), func() (err error) {
			p, err = e.compileProgram(key, build)
			return err
		})
		return p, err
	})
	if err != nil {
		return nil, e.explainMissingOp(err)
	}
	if lk.Why != "" {
		e.notice(fmt.Sprintf("recompiling the %s program: %s", key.Kind, lk.Why))
	}
	p := v.(*program)
	if !compiled {
		if err := e.checkCached(key, p, build); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// explainMissingOp adds the way out to a program that failed on an operation GoMLX's pure-Go
// backend does not have (a convolution's padding, say): nothing in the model is wrong, and the
// XLA CPU plugin has every operation. A run falls back to pure Go only when no plugin is found,
// so the user often did not choose it.
func (e *Engine) explainMissingOp(err error) error {
	if e.backend.Name != backend.Go || !errors.Is(err, notimplemented.NotImplementedError) {
		return err
	}
	return fmt.Errorf("%w (this run is on GoMLX's pure-Go backend, which lacks that operation; the XLA CPU PJRT plugin has it: %s)", err, backend.SetupHint)
}

// checkCached traces the program from this handle's experiment as it is (Host values included)
// and compares it with the graph the cached program was compiled from. A difference the Host
// fields explain is a *markers.HostReadError naming them, exactly as a miss would report it;
// any other difference means a hook read something the key cannot see.
func (e *Engine) checkCached(key compilecache.Key, p *program, build func(g *graph.Graph, src any) outList) error {
	fp, err := e.traceProgram(key.Kind, build, e.exp)
	if err != nil {
		return fmt.Errorf("checking the cached %s program against this experiment: %w", key.Kind, err)
	}
	if fp == p.traced {
		return nil
	}
	if err := markers.CheckHostIndependent(e.exp, func(src any) (string, error) { return e.traceProgram(key.Kind, build, src) }); err != nil {
		return err
	}
	return fmt.Errorf("the cached %s program of %s was compiled from a graph this experiment no longer traces to, "+
		"although every key component (GraphConst values, hooks, inputs, layout, context params) is equal and no Host "+
		"field explains it: a hook reads a value outside the experiment (a global or a captured variable). Make it a "+
		"GraphConst field (recompiles per value) or a Device field (a traced input), or call compilecache.Default().Reset() "+
		"after changing it", key.Kind, e.typeName)
}

// traceProgram builds key's program from src on a trace graph (never compiled) and returns its
// fingerprint, with constants compared by value.
func (e *Engine) traceProgram(kind string, build func(g *graph.Graph, src any) outList, src any) (string, error) {
	var fp string
	err := TryGraph("building the "+kind+" program", func() {
		g := markers.NewTraceGraph(e.backend.Backend, "nitro_check_"+kind)
		defer g.Finalize()
		build(g, src)
		var err error
		if fp, err = markers.Fingerprint(g); err != nil {
			panic(err)
		}
	})
	return fp, err
}

// compileProgram is a cache miss's work (see getProgram).
func (e *Engine) compileProgram(key compilecache.Key, build func(g *graph.Graph, src any) outList) (*program, error) {
	var traced string // the first build is from the experiment as it is; it passes only if the zeroed one agrees
	err := markers.CheckHostIndependent(e.exp, func(src any) (string, error) {
		fp, err := e.traceProgram(key.Kind, build, src)
		if traced == "" {
			traced = fp
		}
		return fp, err
	})
	if err != nil {
		return nil, err
	}
	zero, err := markers.ZeroHost(e.exp)
	if err != nil {
		return nil, err
	}
	p := &program{kind: key.Kind, inputs: key.Inputs, traced: traced}
	err = TryGraph("compiling the "+key.Kind+" program", func() {
		g := e.newProgramGraph(key.Kind)
		outs := build(g, zero)
		if got, want := g.NumParameters(), len(key.Inputs); got != want {
			panic(fmt.Errorf("the %s program has %d inputs, expected %d: a hook read a variable that setup's trace of Forward did not create (create every variable in Forward unconditionally)", key.Kind, got, want))
		}
		if err := p.declare(outs.names); err != nil {
			panic(err)
		}
		if pairs := aliasPairs(key.Inputs, outs.replaces); len(pairs) > 0 {
			aliasMu.Lock()
			defer aliasMu.Unlock()
			pjrthook.DeclareAliases(g.Name(), pairs)
		}
		e.compileOutputs(g, outs.nodes)
		p.g = g
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// key builds a compile-cache key. Device and Host field values never enter it.
func (e *Engine) key(kind, hooks string, inputs signature) compilecache.Key {
	k := compilecache.Key{
		Kind:           kind,
		Experiment:     e.typeName,
		GraphConstHash: e.gcHash,
		GraphConst:     e.gcValues,
		Hook:           hooks,
		Inputs:         inputs,
		DeviceCount:    e.DeviceCount(),
		// The backend is in the key: a program is compiled for one backend, and two engines of one
		// experiment on different backends in one process must not share it.
		Extra: [][2]string{{"backend", e.backend.Name}, {"layout", e.layoutDigest()}, {"context params", e.contextParams()}},
	}
	e.precisionKey(&k)
	return k
}

// contextParams prints the context's settings (what BuildModel configured: activations, dropout
// rates, ...). GoMLX layers read them while tracing, so they shape the program and must be in its
// key; a Host value smuggled in through them then recompiles instead of silently reusing a program.
func (e *Engine) contextParams() string {
	var parts []string
	e.ctx.EnumerateParams(func(scope, key string, value any) {
		parts = append(parts, fmt.Sprintf("%s/%s=%#v", scope, key, value))
	})
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// arg is one program input: a tensor, whether its buffer is donated, which counter counts it if
// it must be uploaded, and whether it is a scalar made for this one call (temp: freed as soon as
// the program has run, not left to the GC).
type arg struct {
	t       *tensors.Tensor
	donate  bool
	counter *int
	temp    bool
}

// execute runs a compiled program. Inputs already on the device are passed as they are; the
// others are uploaded here and counted. It hands the program the device buffers themselves
// (Graph.RunWithBuffers), in two slices kept from call to call: Graph.Run would wrap each donated
// input in an allocation of its own and rebuild both slices on every call.
func (e *Engine) execute(p *program, args []arg) (outs []*tensors.Tensor, err error) {
	if len(args) != len(p.inputs) {
		return nil, fmt.Errorf("internal: program takes %d inputs, got %d", len(p.inputs), len(args))
	}
	if e.mesh != nil {
		return e.executeMesh(p, args)
	}
	bufs, donate := e.scratch.runArgs(len(args))
	defer clear(bufs) // holds no buffer past the call
	for i, a := range args {
		if !a.t.IsOnDevice(0) && a.counter != nil {
			*a.counter++
		}
		donate[i] = a.donate
		if a.donate {
			// The tensor gives its device buffer up (uploading it first if it is on the host):
			// the run consumes it.
			bufs[i], err = a.t.DonateBuffer(e.backend.Backend, 0)
		} else {
			bufs[i], err = a.t.Buffer(e.backend.Backend, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("passing input %s to the device: %w", p.inputs[i].Name, err)
		}
	}
	err = TryGraph("running a program", func() { outs = p.g.RunWithBuffers(bufs, donate, 0) })
	for _, a := range args {
		if a.temp {
			_ = a.t.FinalizeAll() // read by the run, which has returned; a failed free leaves it to the GC
		}
	}
	return outs, err
}

// TryGraph turns a graph-building panic into an error.
func TryGraph(what string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("%s: %w", what, e)
			} else {
				err = fmt.Errorf("%s: %v", what, r)
			}
			if strings.Contains(err.Error(), "Node is nil") {
				err = fmt.Errorf("%w (%s)", err, nilNodeHint)
			}
		}
	}()
	fn()
	return nil
}

// nilNodeHint explains GoMLX's "Node is nil": in a hook it is nearly always a map read of a key
// that is not there, which Go answers with nil rather than an error.
const nilNodeHint = "a hook passed a nil *graph.Node to an op: most often a key that is not there, " +
	"an Outputs key Forward does not return or a map batch key the data does not carry; map reads " +
	"of a missing key give nil, so check each out[\"...\"] and in[\"...\"] against Forward's outputs and the batch fields"

// hookNames lists the hooks a program traces that the experiment defines, for its key's hook
// identity.
func (e *Engine) hookNames(hooks ...string) string {
	var names []string
	for _, h := range hooks {
		if e.hasHook(h) {
			names = append(names, h)
		}
	}
	return strings.Join(names, "+")
}

// hasHook reports whether the experiment defines a traced hook.
func (e *Engine) hasHook(name string) bool {
	switch name {
	case "Forward":
		return e.hooks.Forward != nil
	case "Loss":
		return e.hooks.Loss != nil
	case "Metrics":
		return e.hooks.Metrics != nil
	case "TrainMetrics":
		return e.hooks.TrainMetrics != nil
	case "TrainStep":
		return e.hooks.TrainStep != nil
	}
	return false
}

// route is the keys a hook reads of keys (empty for a hook the experiment does not define).
func (e *Engine) route(hook string, keys []string) []string {
	if hook == "" || !e.hasHook(hook) {
		return nil
	}
	return e.hooks.Route(hook, keys)
}

// TraceInputs creates the parameters of a setup trace (never compiled): the Device fields and
// the batch fields keys at width, named as the programs name them ("device/", "batch/").
func (e *Engine) traceInputs(g *graph.Graph, width int, keys []string) map[string]*graph.Node {
	nodes := map[string]*graph.Node{}
	for name, nd := range e.deviceParams(g) {
		nodes["device/"+name] = nd
	}
	for k, nd := range e.batchParams(g, width, keys) {
		nodes["batch/"+k] = nd
	}
	return nodes
}

// deviceParams creates one graph parameter per Device field (used by the shape trace).
func (e *Engine) deviceParams(g *graph.Graph) map[string]*graph.Node {
	m := map[string]*graph.Node{}
	for _, name := range e.devNames {
		m[name] = graph.Parameter(g, "device/"+name, e.dev[name].Shape())
	}
	return m
}

// batchParams creates graph parameters for batch fields at the given width (used by the shape trace).
func (e *Engine) batchParams(g *graph.Graph, width int, keys []string) map[string]*graph.Node {
	m := map[string]*graph.Node{}
	for _, k := range keys {
		fs := e.fieldShapes[k]
		m[k] = graph.Parameter(g, "batch/"+k, shapes.Make(dtypeOf(fs.DType), append([]int{width}, fs.Row...)...))
	}
	return m
}

// compilingPhase is the Compiling phase of a program kind. The fused train step builds the
// gradient, so it reports GradientCompiling; predict is an eval-mode program.
func compilingPhase(kind string) monitors.Compiling {
	switch kind {
	case compilecache.KindOptimizer:
		return monitors.OptimizerCompiling{}
	case compilecache.KindEval, compilecache.KindPredict:
		return monitors.EvalCompiling{}
	default:
		return monitors.GradientCompiling{}
	}
}
