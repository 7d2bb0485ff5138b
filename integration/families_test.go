package integration_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
	nopt "github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
)

// The three model families `make bench` compares nitro on (BenchmarkFamilies) and that
// TestFamilies checks: each is a nitro experiment, the same model and optimizer written as a plain
// GoMLX loop (famLoop), and the same again in JAX (scripts/bench/jax_families.py --family).
//
//   - mlp: 784-512-512-10, relu, RAdam at 1e-3 (the framework's default rule); BenchMLP.
//   - cnn: the Flax MNIST example's shape on [28,28,1] images: conv 32 3x3 (same padding) relu,
//     average pool 2, conv 64 3x3 relu, average pool 2, dense 256 relu, dense 10; heavy-ball
//     momentum 0.9 (optax.sgd's trace form) at 0.01.
//   - transformer: a pre-norm encoder over 32 tokens of a 64-symbol vocabulary: learned token and
//     position embeddings (d 64), 2 blocks of 4-head self-attention and a 4x relu MLP, each behind
//     a layer norm with a residual, a final layer norm and a dense head over the vocabulary;
//     token classification (the label at position t is the token at t-1, position 0 its own
//     token), Adam at 1e-3.
//
// Every loss is softmax cross-entropy on integer labels, averaged over the batch (and positions).
const (
	cnnSide    = 28
	cnnClasses = 10
	tfVocab    = 64
	tfSeq      = 32
	tfDModel   = 64
	tfHeads    = 4
	tfBlocks   = 2
	tfMLP      = 4 * tfDModel
	tfLNEps    = 1e-5
)

// family is one model family: how to build it on each side, its data and its matmul flops.
type family struct {
	name  string
	batch int
	steps int // optimizer steps per timed repeat
	// repeats is the number of timed rounds; a slow step gets short repeats and more of them, so
	// the sides paired in one round run close together in time on a shared machine. The CNN's
	// 5 timed steps a repeat left its per-repeat ratios spread 0.91-1.44 over 9 repeats: 15.
	repeats int
	lr      float64
	opt     string // the rule both Go sides run: "radam", "momentum" or "adam"
	// newExp returns the nitro experiment; model and loss are the same math for the GoMLX loop.
	newExp func() any
	model  func(ctx *context.Context, x *graph.Node) *graph.Node
	loss   func(logits, labels *graph.Node) *graph.Node
	// data draws n rows: x's flat values (float32 or int32) with its row shape, and the labels
	// with theirs.
	data func(rng *rand.Rand, n int) (x any, xRow []int, y []int32, yRow []int)
	// flops counts the matmul and convolution flops of one training step at a batch.
	flops func(batch int) float64
}

// families lists the three families at their benchmark sizes.
func families() []*family {
	return []*family{
		{name: "mlp", batch: benchBatch, steps: 30, repeats: 7, lr: 1e-3, opt: "radam",
			newExp: func() any { return &BenchMLP{Hidden: benchHidden} },
			model:  func(ctx *context.Context, x *graph.Node) *graph.Node { return benchModel(ctx, x, benchHidden) },
			loss:   benchLoss, data: mlpData, flops: func(b int) float64 { return mlpFlops(b) }},
		{name: "cnn", batch: 128, steps: 6, repeats: 15, lr: 0.01, opt: "momentum",
			newExp: func() any { return &FamCNN{} }, model: cnnModel,
			loss: func(l, y *graph.Node) *graph.Node { return famLoss(l, y, cnnClasses) }, data: cnnData, flops: cnnFlops},
		{name: "transformer", batch: 32, steps: 30, repeats: 7, lr: 1e-3, opt: "adam",
			newExp: func() any { return &FamTransformer{} }, model: tfModel,
			loss: func(l, y *graph.Node) *graph.Node { return famLoss(l, y, tfVocab) }, data: tfData, flops: tfFlops},
	}
}

// famLoss is the mean softmax cross-entropy of logits [..., classes] against integer labels [...].
func famLoss(logits, labels *graph.Node, classes int) *graph.Node {
	onehot := graph.OneHot(labels, classes, logits.DType())
	return graph.ReduceAllMean(graph.Neg(graph.ReduceSum(graph.Mul(onehot, graph.LogSoftmax(logits, -1)), -1)))
}

// FamCNN is the nitro side of the cnn family.
type FamCNN struct{}

func (e *FamCNN) BuildModel(ctx *context.Context) error { return nil }
func (e *FamCNN) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("FamCNN's data is supplied with core.WithData")
}
func (e *FamCNN) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": cnnModel(ctx, in.X)}
}
func (e *FamCNN) Loss(out core.Outputs, in Labels) *graph.Node {
	return famLoss(out["logits"], in.Y, cnnClasses)
}

// OptimizerRule is heavy-ball momentum; its Eta is left zero so LearningRate feeds it.
func (e *FamCNN) OptimizerRule(string) nopt.Rule { return nopt.Momentum{Rho: 0.9} }

// FamTransformer is the nitro side of the transformer family.
type FamTransformer struct{}

func (e *FamTransformer) BuildModel(ctx *context.Context) error { return nil }
func (e *FamTransformer) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("FamTransformer's data is supplied with core.WithData")
}
func (e *FamTransformer) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": tfModel(ctx, in.X)}
}
func (e *FamTransformer) Loss(out core.Outputs, in Labels) *graph.Node {
	return famLoss(out["logits"], in.Y, tfVocab)
}

// OptimizerRule is Adam at optax's defaults; its Eta is left zero so LearningRate feeds it.
func (e *FamTransformer) OptimizerRule(string) nopt.Rule {
	a := nopt.NewAdam()
	a.Eta = 0
	return a
}

func cnnModel(ctx *context.Context, x *graph.Node) *graph.Node {
	conv := func(scope string, h *graph.Node, filters int) *graph.Node {
		h = activations.Relu(layers.Convolution(ctx.In(scope), h).Filters(filters).KernelSize(3).PadSame().Done())
		return graph.MeanPool(h).Window(2).Done()
	}
	h := conv("conv_0", x, 32)
	h = conv("conv_1", h, 64)
	h = graph.Reshape(h, h.Shape().Dimensions[0], -1)
	h = activations.Relu(layers.Dense(ctx.In("dense_0"), h, true, 256))
	return layers.Dense(ctx.In("dense_1"), h, true, cnnClasses)
}

// layerNorm normalizes the last axis, then scales and shifts it by learned vectors (gain starts
// at one, bias at zero).
func layerNorm(ctx *context.Context, x *graph.Node) *graph.Node {
	g, d := x.Graph(), x.Shape().Dimensions[x.Rank()-1]
	gain := ctx.VariableWithValue("gain", slices.Repeat([]float32{1}, d)).ValueGraph(g)
	bias := ctx.VariableWithValue("bias", make([]float32, d)).ValueGraph(g)
	mean := graph.ReduceAndKeep(x, graph.ReduceMean, -1)
	c := graph.Sub(x, mean)
	v := graph.ReduceAndKeep(graph.Square(c), graph.ReduceMean, -1)
	r := x.Rank()
	return graph.Add(graph.Mul(graph.Div(c, graph.Sqrt(graph.AddScalar(v, tfLNEps))), graph.ExpandLeftToRank(gain, r)), graph.ExpandLeftToRank(bias, r))
}

func tfModel(ctx *context.Context, tok *graph.Node) *graph.Node {
	return tfModelOrdered(ctx, tok, true)
}

// tfModelOrdered is tfModel with the attention's att·v product written either way round: vLeft
// (the benchmark's) makes v the dot's left operand; false is the order the einsum reads in, kept
// for TestTransformerValueLeft, which checks both train alike.
func tfModelOrdered(ctx *context.Context, tok *graph.Node, vLeft bool) *graph.Node {
	g, b := tok.Graph(), tok.Shape().Dimensions[0]
	dh := tfDModel / tfHeads
	emb := ctx.In("embed").VariableWithShape("tokens", shapes.Make(dtypes.Float32, tfVocab, tfDModel)).ValueGraph(g)
	pos := ctx.In("embed").VariableWithShape("positions", shapes.Make(dtypes.Float32, tfSeq, tfDModel)).ValueGraph(g)
	x := graph.Add(graph.Gather(emb, graph.InsertAxes(tok, -1)), graph.InsertAxes(pos, 0))
	heads := func(c *context.Context, h *graph.Node) *graph.Node {
		return graph.Reshape(layers.Dense(c, h, true, tfDModel), b, tfSeq, tfHeads, dh)
	}
	for i := range tfBlocks {
		c := ctx.In(fmt.Sprintf("block_%d", i))
		h := layerNorm(c.In("ln_0"), x)
		q, k, v := heads(c.In("q"), h), heads(c.In("k"), h), heads(c.In("v"), h)
		att := graph.Softmax(graph.MulScalar(graph.Einsum("bqhd,bkhd->bhqk", q, k), 1/math.Sqrt(float64(dh))), -1)
		// v is the dot's left operand (out [b,h,d,q], then transposed) so that v's gradient is a
		// plain row-major matmul the CPU plugin's fast path takes; att·v the other way round
		// leaves that gradient contracting the operands' second-minor axes, a generic dot outside that path.
		var o *graph.Node
		if vLeft {
			o = graph.Einsum("bkhd,bhqk->bqhd", v, att)
		} else {
			o = graph.Einsum("bhqk,bkhd->bqhd", att, v)
		}
		o = graph.Reshape(o, b, tfSeq, tfDModel)
		x = graph.Add(x, layers.Dense(c.In("attn_out"), o, true, tfDModel))
		h = activations.Relu(layers.Dense(c.In("mlp_0"), layerNorm(c.In("ln_1"), x), true, tfMLP))
		x = graph.Add(x, layers.Dense(c.In("mlp_1"), h, true, tfDModel))
	}
	return layers.Dense(ctx.In("head"), layerNorm(ctx.In("ln_f"), x), true, tfVocab)
}

func mlpData(rng *rand.Rand, n int) (any, []int, []int32, []int) {
	xs := make([]float32, n*benchIn)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	return xs, []int{benchIn}, randLabels(rng, n, benchOut), nil
}

func cnnData(rng *rand.Rand, n int) (any, []int, []int32, []int) {
	xs := make([]float32, n*cnnSide*cnnSide)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	return xs, []int{cnnSide, cnnSide, 1}, randLabels(rng, n, cnnClasses), nil
}

// tfData draws uniform tokens; the label at position t is the token at t-1 (position 0: its own),
// so the task needs attention to the previous position and a model can learn it.
func tfData(rng *rand.Rand, n int) (any, []int, []int32, []int) {
	tok := randLabels(rng, n*tfSeq, tfVocab)
	y := make([]int32, len(tok))
	for r := range n {
		row := tok[r*tfSeq : (r+1)*tfSeq]
		y[r*tfSeq] = row[0]
		copy(y[r*tfSeq+1:(r+1)*tfSeq], row[:tfSeq-1])
	}
	return tok, []int{tfSeq}, y, []int{tfSeq}
}

func randLabels(rng *rand.Rand, n, classes int) []int32 {
	ys := make([]int32, n)
	for i := range ys {
		ys[i] = int32(rng.IntN(classes))
	}
	return ys
}

// mlpFlops is stepFlops at another batch: per layer the forward, weight-gradient and
// input-gradient matmuls, less the first layer's input gradient (its input is data).
func mlpFlops(batch int) float64 { return stepFlops() * float64(batch) / benchBatch }

// cnnFlops counts 2*M*N*K per matmul and per convolution (every output position of a same-padded
// 3x3 convolution counts 9 taps): the forward, the weight gradient and the input gradient of each
// layer, less the first convolution's input gradient (its input is data). Pools, biases, relus
// and the optimizer are not counted. The JAX side counts the same way.
func cnnFlops(batch int) float64 {
	b := float64(batch)
	conv0 := 2 * b * 28 * 28 * 32 * 9 * 1
	conv1 := 2 * b * 14 * 14 * 64 * 9 * 32
	dense0 := 2 * b * 7 * 7 * 64 * 256
	dense1 := 2 * b * 256 * cnnClasses
	return 2*conv0 + 3*(conv1+dense0+dense1)
}

// tfFlops counts the transformer's matmuls (2*M*N*K each): per block the q, k, v and output
// projections, the scores q·kᵀ and the weighted sum att·v, the two MLP matmuls; then the head.
// Every one needs both gradients (the first matmuls read a layer norm of the embedding, not
// data), so a step is three times the forward. The embedding gather is not counted.
func tfFlops(batch int) float64 {
	bs := float64(batch * tfSeq)
	d := float64(tfDModel)
	attn := 2 * float64(batch*tfHeads) * tfSeq * tfSeq * float64(tfDModel/tfHeads)
	block := 4*2*bs*d*d + 2*attn + 2*2*bs*d*float64(tfMLP)
	return 3 * (tfBlocks*block + 2*bs*d*tfVocab)
}

// famBatches holds n rows of a family's data as host arrays, and cuts fresh host batches from
// them: each call copies its rows, as nitro's ArrayBatches does for the nitro sides.
type famBatches struct {
	f     *family
	n     int
	x     any // []float32 or []int32
	xRow  []int
	y     []int32
	yRow  []int
	xSize int // values per row of x
	ySize int
}

func newFamBatches(f *family, seed uint64, n int) *famBatches {
	x, xRow, y, yRow := f.data(rand.New(rand.NewPCG(seed, seed)), n)
	d := &famBatches{f: f, n: n, x: x, xRow: xRow, y: y, yRow: yRow, xSize: 1, ySize: 1}
	for _, v := range xRow {
		d.xSize *= v
	}
	for _, v := range yRow {
		d.ySize *= v
	}
	return d
}

// tensors returns the whole arrays as tensors (for nitro's ArrayBatches).
func (d *famBatches) tensors() map[string]*tensors.Tensor {
	var x *tensors.Tensor
	switch v := d.x.(type) {
	case []float32:
		x = tensors.FromFlatDataAndDimensions(slices.Clone(v), append([]int{d.n}, d.xRow...)...)
	case []int32:
		x = tensors.FromFlatDataAndDimensions(slices.Clone(v), append([]int{d.n}, d.xRow...)...)
	}
	return map[string]*tensors.Tensor{"x": x, "y": tensors.FromFlatDataAndDimensions(slices.Clone(d.y), append([]int{d.n}, d.yRow...)...)}
}

// source is nitro's view of the same rows, in order (no shuffle), full batches only.
func (d *famBatches) source(batch int) (*prefetch.ArrayBatches, error) {
	return prefetch.NewArrayBatches(d.tensors(), batch, prefetch.ArrayOptions{DropPartial: true})
}

// batch copies batch i (of size b) into fresh host tensors.
func (d *famBatches) batch(i, b int) (*tensors.Tensor, *tensors.Tensor) {
	lo, hi := i*b, (i+1)*b
	var x *tensors.Tensor
	switch v := d.x.(type) {
	case []float32:
		x = tensors.FromFlatDataAndDimensions(slices.Clone(v[lo*d.xSize:hi*d.xSize]), append([]int{b}, d.xRow...)...)
	case []int32:
		x = tensors.FromFlatDataAndDimensions(slices.Clone(v[lo*d.xSize:hi*d.xSize]), append([]int{b}, d.xRow...)...)
	}
	y := tensors.FromFlatDataAndDimensions(slices.Clone(d.y[lo*d.ySize:hi*d.ySize]), append([]int{b}, d.yRow...)...)
	return x, y
}

// famLoop is the hand-written GoMLX side of a family: one context.Exec per step that runs the
// forward pass, the gradient and the family's optimizer rule (written below in graph ops, in
// optax's form, as nitro's rules are) on the context's variables, returning the loss. Build it
// after a core.New: core installs dotgrad's matrix-product gradients, which both sides then use.
type famLoop struct {
	f    *family
	ctx  *context.Context
	exec *context.Exec
}

// newFamLoop builds the loop; init, when non-nil, gives the starting parameters by keypath
// ("conv_0/weights", as core.Nitro.Parameters names them), so the loop starts where a nitro
// handle does.
func newFamLoop(r *backend.Resolved, f *family, init map[string]*tensors.Tensor) (*famLoop, error) {
	ctx := context.New()
	ctx.SetRNGStateFromSeed(42)
	for kp, t := range init {
		c, name := ctxAt(ctx, kp)
		c.VariableWithValue(name, t)
	}
	exec, err := context.NewExec(r.Backend, ctx.Checked(false), func(ctx *context.Context, x, y *graph.Node) *graph.Node {
		g := x.Graph()
		ctx.SetTraining(g, true)
		loss := f.loss(f.model(ctx, x), y)
		var vars []*context.Variable
		var nodes []*graph.Node
		for v := range ctx.IterVariables() {
			if v.Trainable && v.InUseByGraph(g) {
				vars = append(vars, v)
				nodes = append(nodes, v.ValueGraph(g))
			}
		}
		grads := graph.Gradient(loss, nodes...)
		applyRule(ctx.In("hand_opt"), f.opt, f.lr, vars, nodes, grads)
		return loss
	})
	if err != nil {
		return nil, err
	}
	return &famLoop{f: f, ctx: ctx, exec: exec}, nil
}

// step runs one step on a host batch and returns its loss, read back.
func (l *famLoop) step(x, y *tensors.Tensor) (float32, error) {
	out, err := l.exec.Exec(x, y)
	if err != nil {
		return 0, err
	}
	v, ok := out[0].Value().(float32)
	if !ok {
		return 0, fmt.Errorf("GoMLX loss is %T, want float32", out[0].Value())
	}
	return v, nil
}

// applyRule updates each variable from its gradient by rule, in optax's forms (nitro's rules
// follow them too):
//
//	momentum: m = g + 0.9 m; p -= lr m
//	adam:     mu, nu moments (0.9, 0.999); p -= lr mu_hat / (sqrt(nu_hat) + 1e-8)
//	radam:    adam's moments; p -= lr (rho_t >= 5 ? r_t mu_hat/(sqrt(nu_hat)+1e-8) : mu_hat)
//
// The step count and its scalars (b^t, the corrections, rho_t, r_t) are float64, as nitro's are.
func applyRule(ctx *context.Context, rule string, lr float64, vars []*context.Variable, params, grads []*graph.Node) {
	g := params[0].Graph()
	stepVar := ctx.VariableWithValue("step", float64(0)).SetTrainable(false)
	t := graph.AddScalar(stepVar.ValueGraph(g), 1)
	stepVar.SetValueGraph(t)
	const b1, b2, eps = 0.9, 0.999, 1e-8
	f32 := func(n *graph.Node) *graph.Node { return graph.ConvertDType(n, dtypes.Float32) }
	pow := func(b float64) *graph.Node { return graph.Pow(graph.Const(g, b), t) }
	var c1, c2, adaptive, plain *graph.Node // corrections and RAdam's branch coefficients
	if rule != "momentum" {
		bt1, bt2 := pow(b1), pow(b2)
		c1, c2 = f32(graph.Inverse(graph.OneMinus(bt1))), f32(graph.Inverse(graph.OneMinus(bt2)))
		adaptive, plain = graph.Const(g, float32(1)), graph.Const(g, float32(0))
		if rule == "radam" {
			rhoInf := 2/(1-b2) - 1
			rho := graph.Sub(graph.Const(g, rhoInf), graph.Div(graph.MulScalar(graph.Mul(t, bt2), 2), graph.OneMinus(bt2)))
			num := graph.Mul(graph.Mul(graph.AddScalar(rho, -4), graph.AddScalar(rho, -2)), graph.Const(g, rhoInf))
			den := graph.MulScalar(rho, (rhoInf-4)*(rhoInf-2))
			r := graph.Sqrt(graph.Max(graph.Div(num, den), graph.ScalarZero(g, dtypes.Float64)))
			on := graph.GreaterOrEqual(rho, graph.Const(g, 5.0))
			adaptive = f32(graph.Where(on, r, graph.ScalarZero(g, dtypes.Float64)))
			plain = f32(graph.Where(on, graph.ScalarZero(g, dtypes.Float64), graph.ScalarOne(g, dtypes.Float64)))
		}
	}
	for i, v := range vars {
		p, gr := params[i], grads[i]
		// State starts at zero the first time and persists after (VariableWithValueGraph would
		// reset it to its value node at every step).
		zeros := ctx.In(fmt.Sprintf("v%d", i)).WithInitializer(func(g *graph.Graph, s shapes.Shape) *graph.Node { return graph.Zeros(g, s) })
		state := func(name string) *context.Variable {
			return zeros.VariableWithShape(name, p.Shape()).SetTrainable(false)
		}
		var upd *graph.Node
		if rule == "momentum" {
			m := state("trace")
			mv := graph.Add(gr, graph.MulScalar(m.ValueGraph(g), 0.9))
			m.SetValueGraph(mv)
			upd = mv
		} else {
			mu, nu := state("mu"), state("nu")
			muv := graph.Add(graph.MulScalar(mu.ValueGraph(g), b1), graph.MulScalar(gr, 1-b1))
			nuv := graph.Add(graph.MulScalar(nu.ValueGraph(g), b2), graph.MulScalar(graph.Square(gr), 1-b2))
			mu.SetValueGraph(muv)
			nu.SetValueGraph(nuv)
			muHat := graph.Mul(muv, c1)
			scaled := graph.Div(muHat, graph.AddScalar(graph.Sqrt(graph.Mul(nuv, c2)), eps))
			upd = graph.Add(graph.Mul(scaled, adaptive), graph.Mul(muHat, plain))
		}
		v.SetValueGraph(graph.Sub(p, graph.MulScalar(upd, lr)))
	}
}

// famLossClock is a logger that records each optimizer step's end time and loss (Train writes
// one "train" line per step, right after its loss is read back). Its Finish does nothing, so one
// serves every Train of a long-lived handle.
type famLossClock struct {
	stepClock
	losses []float64
}

func (c *famLossClock) LogMetrics(m logjson.Metrics) error {
	if m.Context == logjson.ContextTrain {
		c.losses = append(c.losses, m.Values["loss"])
	}
	return c.stepClock.LogMetrics(m)
}

// newFamNitro builds a nitro handle for a family over a train split of d (and a test split for
// the eval program), with its private compile cache and a loss clock.
func newFamNitro(f *family, d *famBatches, batch int, cache *compilecache.Cache, opts ...core.Option) (*core.Nitro, *famLossClock, error) {
	train, err := d.source(batch)
	if err != nil {
		return nil, nil, err
	}
	test, err := d.source(batch)
	if err != nil {
		return nil, nil, err
	}
	clock := &famLossClock{}
	opts = append([]core.Option{core.WithBackend("xla"), core.Quiet(), core.WithCache(cache), core.WithLogger(clock), core.WithoutCheckpoints(),
		core.WithData(prefetch.Data{"train": train, "test": test}), core.WithMaxEpochs(1 << 20), core.WithLearningRate(f.lr)}, opts...)
	nt, err := core.New(f.newExp(), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("family %s: %w", f.name, err)
	}
	return nt, clock, nil
}

// epoch trains exactly one more epoch (RequestStop before Train stops it at the epoch's end).
func epoch(nt *core.Nitro) error {
	nt.RequestStop()
	return nt.Train()
}

// TestFamilies checks each benchmark family at a small batch: the nitro experiment's loss falls
// over a few epochs of a small fixed dataset, and the hand-written GoMLX loop, started from
// nitro's initial parameters on the same batches, reports the same first losses as nitro's
// two-program step (so the benchmark's sides do the same math, optimizer included).
func TestFamilies(t *testing.T) {
	r := requireXLA(t)
	const batch, batches, epochs = 16, 2, 6
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			d := newFamBatches(f, 3, batch*batches)
			nt, clock, err := newFamNitro(f, d, batch, compilecache.New())
			if err != nil {
				t.Fatal(err)
			}
			init, err := nt.Parameters()
			if err != nil {
				t.Fatal(err)
			}
			for range epochs {
				if err := epoch(nt); err != nil {
					t.Fatal(err)
				}
			}
			ls := clock.losses
			if len(ls) != batches*epochs {
				t.Fatalf("nitro logged %d losses, want %d", len(ls), batches*epochs)
			}
			// Each epoch sees the same two batches; compare the first batch's loss across epochs.
			if first, last := ls[0], ls[len(ls)-batches]; !(last < 0.9*first) {
				t.Errorf("nitro's loss on batch 0 went %.4f -> %.4f over %d epochs, want a drop of over 10%% (losses %.4f)", first, last, epochs, ls)
			}
			loop, err := newFamLoop(r, f, init)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 * batches {
				x, y := d.batch(i%batches, batch)
				got, err := loop.step(x, y)
				if err != nil {
					t.Fatal(err)
				}
				if want := ls[i]; math.Abs(float64(got)-want) > 1e-4*math.Max(1, math.Abs(want)) {
					t.Errorf("step %d: GoMLX loop's loss %.6f, nitro's %.6f: the two sides do not do the same step", i+1, got, want)
				}
			}
		})
	}
}
