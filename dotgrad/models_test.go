package dotgrad

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/stablehlo"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/internal/prereq"
)

// model is a training program whose gradient we inspect.
type model struct {
	name string
	// activationBytes is the size of the forward activations: input, hidden layers and logits.
	activationBytes int64
	// build makes the forward graph and returns the loss and the variables' values.
	build func(ctx *context.Context, g *graph.Graph) (loss *graph.Node, vars []*graph.Node)
	// controlOverBound: GoMLX's own gradient breaks the 4x-activations bound, so the bound is
	// shown to bite. The embedding model's Dot is small and its gradient meets the bound either
	// way: there dotgrad must only not cost more.
	controlOverBound bool
}

func variables(ctx *context.Context, g *graph.Graph) (vars []*graph.Node) {
	for v := range ctx.IterVariables() {
		vars = append(vars, v.ValueGraph(g))
	}
	return vars
}

func crossEntropy(g *graph.Graph, batch int, logits *graph.Node) *graph.Node {
	labels := graph.Parameter(g, "labels", shapes.Make(dtypes.Int32, batch, 1))
	return losses.SparseCategoricalCrossEntropyLogits([]*graph.Node{labels}, []*graph.Node{logits})
}

const f32 = 4 // bytes

// models: an MLP (Dense: Dot), a small CNN (ConvGeneral, then Dense) and an embedding model
// (Gather, then Dense).
var models = []model{
	{
		name:            "mlp",
		activationBytes: 128 * (784 + 512 + 512 + 10) * f32,
		build: func(ctx *context.Context, g *graph.Graph) (*graph.Node, []*graph.Node) {
			x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 128, 784))
			h := activations.Relu(layers.Dense(ctx.In("l0"), x, true, 512))
			h = activations.Relu(layers.Dense(ctx.In("l1"), h, true, 512))
			logits := layers.Dense(ctx.In("l2"), h, true, 10)
			return crossEntropy(g, 128, logits), variables(ctx, g)
		},
		controlOverBound: true,
	},
	{
		name:            "cnn",
		activationBytes: 64 * (28*28*1 + 26*26*16 + 24*24*32 + 10) * f32,
		build: func(ctx *context.Context, g *graph.Graph) (*graph.Node, []*graph.Node) {
			x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 64, 28, 28, 1))
			h := activations.Relu(layers.Convolution(ctx.In("c0"), x).Filters(16).KernelSize(3).Done())
			h = layers.Convolution(ctx.In("c1"), h).Filters(32).KernelSize(3).Done()
			h = graph.Reshape(h, 64, -1)
			logits := layers.Dense(ctx.In("out"), h, true, 10)
			return crossEntropy(g, 64, logits), variables(ctx, g)
		},
		controlOverBound: true,
	},
	{
		name:            "embedding",
		activationBytes: 128 * (32 + 32*64 + 64 + 10) * f32,
		build: func(ctx *context.Context, g *graph.Graph) (*graph.Node, []*graph.Node) {
			tokens := graph.Parameter(g, "tokens", shapes.Make(dtypes.Int32, 128, 32))
			emb := layers.Embedding(ctx.In("emb"), tokens, dtypes.Float32, 5000, 64) // [128, 32, 64]
			pooled := graph.ReduceMean(emb, 1)
			logits := layers.Dense(ctx.In("out"), pooled, true, 10)
			return crossEntropy(g, 128, logits), variables(ctx, g)
		},
	},
}

// buildGradient builds m's loss and its gradients with respect to every variable. forward is the
// number of nodes before the gradient was added.
func buildGradient(b backends.Backend, m model) (g *graph.Graph, outputs []*graph.Node, forward int) {
	g = graph.NewGraph(b, m.name)
	loss, vars := m.build(context.New(), g)
	forward = len(g.Nodes())
	return g, append([]*graph.Node{loss}, graph.Gradient(loss, vars...)...), forward
}

// oversizedGradientNodes lists the nodes added by the gradient that hold more elements than any
// node of the forward program.
func oversizedGradientNodes(g *graph.Graph, forward int) (largestForward int, oversized []*graph.Node) {
	nodes := g.Nodes()
	for _, n := range nodes[:forward] {
		if n.NumOutputs() == 1 {
			largestForward = max(largestForward, n.Shape().Size())
		}
	}
	for _, n := range nodes[forward:] {
		if n.NumOutputs() == 1 && n.Shape().Size() > largestForward {
			oversized = append(oversized, n)
		}
	}
	return largestForward, oversized
}

// outerProducts lists the rank-3 broadcasts and products of [batch, in, out] elements for a
// 784-512-512-10 MLP at batch 128.
func outerProducts(g *graph.Graph) (found []*graph.Node) {
	for _, n := range g.Nodes() {
		if n.NumOutputs() != 1 || n.Rank() != 3 || (n.Type() != graph.NodeTypeBroadcastInDim && n.Type() != graph.NodeTypeMul) {
			continue
		}
		switch n.Shape().Size() {
		case 128 * 784 * 512, 128 * 512 * 512, 128 * 512 * 10:
			found = append(found, n)
		}
	}
	return found
}

// TestMLPGradientHasNoOuterProducts walks the gradient program of a Dense MLP: with the installed
// gradients it holds no [batch, in, out] broadcast or product; with GoMLX's it does (the defect this
// package exists for, which keeps the check honest).
func TestMLPGradientHasNoOuterProducts(t *testing.T) {
	b := pureGo(t)
	// check returns descriptions of the outer products and of the gradient nodes larger than any
	// forward node (taken before the graph is finalized).
	check := func() (outer, oversized []string) {
		g, _, forward := buildGradient(b, models[0])
		defer g.Finalize()
		for _, n := range outerProducts(g) {
			outer = append(outer, n.String())
		}
		largest, big := oversizedGradientNodes(g, forward)
		for _, n := range big {
			oversized = append(oversized, fmt.Sprintf("%s (the largest forward node has %d elements)", n, largest))
		}
		return outer, oversized
	}
	before := fallbacks.Load()
	outer, oversized := check()
	if fb := fallbacks.Load() - before; fb != 0 {
		t.Errorf("the installed gradient fell back to GoMLX's %d time(s)", fb)
	}
	for _, n := range outer {
		t.Errorf("outer product in the installed gradient: %s", n)
	}
	for _, n := range oversized {
		t.Errorf("gradient node larger than any forward node: %s", n)
	}
	withOriginalGradients(t, func() { outer, oversized = check() })
	if len(outer) == 0 || len(oversized) == 0 {
		t.Error("GoMLX's own gradient no longer builds [batch, in, out] outer products: the check cannot see them, or GoMLX fixed them (then reconsider this package)")
	} else {
		t.Logf("GoMLX's own gradient: %d outer-product nodes, e.g. %s", len(outer), outer[0])
	}
}

// TestGradientNodesNoLargerThanForward checks, for every model, that no node of the gradient
// program is larger than the largest node of the forward program. The CNN's gradient needs the
// Reverse op, which the pure-Go backend lacks, so it is built on XLA.
func TestGradientNodesNoLargerThanForward(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			b := pureGo(t)
			if m.name == "cnn" {
				b = xlaBackend(t)
			}
			g, _, forward := buildGradient(b, m)
			defer g.Finalize()
			largest, oversized := oversizedGradientNodes(g, forward)
			for _, n := range oversized {
				t.Errorf("gradient node larger than any forward node (%d elements): %s", largest, n)
			}
			t.Logf("%s: %d gradient nodes, none larger than the largest forward node (%d elements)", m.name, len(g.Nodes())-forward, largest)
		})
	}
}

// XLA measurements. XLA reads XLA_FLAGS once per process, so each program is compiled by a
// re-execution of this test binary (see TestMain) with --xla_dump_to set, and the buffer
// assignment XLA dumps is read back here.
const (
	envChild  = "DOTGRAD_XLA_CHILD"  // "<model>:<install|original>"
	envPlugin = "DOTGRAD_XLA_PLUGIN" // the PJRT plugin the child loads
)

// requirePlugin returns the plugin path backend.FindPlugin finds (the resolver's own search), or
// stops the test: a skip without one (a failure under CI), a failure when the search refuses a place.
func requirePlugin(t *testing.T) string {
	t.Helper()
	p, searched, err := backend.FindPlugin()
	if err != nil {
		prereq.XLAPlugin.Broken(t, err)
	}
	if p == "" {
		prereq.XLAPlugin.Absent(t, fmt.Sprintf("searched %v", searched))
	}
	return p
}

var (
	xlaOnce sync.Once
	xla     backends.Backend
	xlaErr  error
)

// xlaBackend returns an XLA backend shared by the tests of this process (skipping or failing as
// requirePlugin does when there is no plugin).
func xlaBackend(t *testing.T) backends.Backend {
	t.Helper()
	plugin := requirePlugin(t)
	xlaOnce.Do(func() { xla, xlaErr = stablehlo.New(plugin) })
	if xlaErr != nil {
		t.Fatalf("starting XLA with %s: %v", plugin, xlaErr)
	}
	return xla
}

// xlaChild compiles one model's gradient program with XLA; spec is "<model>:<install|original>".
func xlaChild(spec string) error {
	name, mode, _ := strings.Cut(spec, ":")
	switch mode {
	case "install":
		Install()
	case "original":
	default:
		return fmt.Errorf("%s=%q: mode must be install or original", envChild, spec)
	}
	var m *model
	for i := range models {
		if models[i].name == name {
			m = &models[i]
		}
	}
	if m == nil {
		return fmt.Errorf("%s=%q: no model %q", envChild, spec, name)
	}
	b, err := stablehlo.New(os.Getenv(envPlugin))
	if err != nil {
		return err
	}
	g, outputs, _ := buildGradient(b, *m)
	g.Compile(outputs...)
	return nil
}

// xlaMemory is what XLA's buffer assignment says of one compiled program.
type xlaMemory struct {
	temp  int64 // bytes of temporary buffers (not parameters, outputs, constants)
	total int64 // "Total bytes used" (older XLA) or the memory-usage report's "Total bytes"
}

var (
	allocationRE = regexp.MustCompile(`(?m)^allocation \d+: size (\d+)(.*)$`)
	totalRE      = regexp.MustCompile(`(?m)^Total bytes(?: used)?: (\d+)`)
)

// parseBufferAssignment reads an XLA *-buffer-assignment.txt dump. Older XLA (the xla-cpu-pjrt
// plugin) ends it with "Total bytes used"; newer XLA (jaxlib 0.11's) writes the total into the
// sibling *-memory-usage-report.txt instead, which measureXLA appends to the text.
func parseBufferAssignment(text string) (xlaMemory, error) {
	var mem xlaMemory
	m := totalRE.FindStringSubmatch(text)
	if m == nil {
		return mem, fmt.Errorf("no %q line", "Total bytes used")
	}
	mem.total, _ = strconv.ParseInt(m[1], 10, 64)
	allocations := allocationRE.FindAllStringSubmatch(text, -1)
	if len(allocations) == 0 {
		return mem, fmt.Errorf("no allocations listed")
	}
	for _, a := range allocations {
		size, _ := strconv.ParseInt(a[1], 10, 64)
		tags := a[2]
		temp := strings.Contains(tags, "preallocated-temp")
		if !temp {
			temp = true
			for _, tag := range []string{"parameter", "maybe-live-out", "output shape", "constant", "thread-local"} {
				if strings.Contains(tags, tag) {
					temp = false
				}
			}
		}
		if temp {
			mem.temp += size
		}
	}
	return mem, nil
}

// measureXLA compiles model name's gradient program in a child process, with dotgrad installed or
// not, and reads back XLA's buffer assignment of the optimized module.
func measureXLA(t *testing.T, plugin, name string, install bool) xlaMemory {
	t.Helper()
	dir := t.TempDir()
	mode := "original"
	if install {
		mode = "install"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envChild+"="+name+":"+mode,
		envPlugin+"="+plugin,
		"XLA_FLAGS="+strings.TrimSpace(os.Getenv("XLA_FLAGS")+" --xla_dump_to="+dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling %s (%s) with XLA: %v\n%s", name, mode, err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*."+name+".*after_optimizations-buffer-assignment.txt"))
	if len(files) == 0 {
		t.Fatalf("XLA dumped no after-optimizations buffer assignment for %s in %s", name, dir)
	}
	var mem xlaMemory
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		report, err := os.ReadFile(strings.TrimSuffix(f, "-buffer-assignment.txt") + "-memory-usage-report.txt")
		if err == nil {
			text = append(append(text, '\n'), report...)
		}
		m, err := parseBufferAssignment(string(text))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		mem.temp, mem.total = max(mem.temp, m.temp), max(mem.total, m.total)
	}
	return mem
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// TestXLATempBuffers compiles each model's gradient program with XLA and checks its temporary
// buffers stay within 4x the forward activations (and, for the MLP, under 16 MiB), and never
// exceed those of GoMLX's own gradients. The control, GoMLX's gradients, must break the same
// bounds for the models marked controlOverBound: a bound both sides meet would show nothing.
// Run with -v to see the numbers:
//
//	go test ./dotgrad/ -run XLATempBuffers -v
func TestXLATempBuffers(t *testing.T) {
	plugin := requirePlugin(t)
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			after := measureXLA(t, plugin, m.name, true)
			before := measureXLA(t, plugin, m.name, false)
			t.Logf("%s: XLA temp buffers %s with dotgrad (total %s), %s with GoMLX's gradients (total %s); activations %s",
				m.name, mib(after.temp), mib(after.total), mib(before.temp), mib(before.total), mib(m.activationBytes))
			if limit := 4 * m.activationBytes; after.temp > limit {
				t.Errorf("%s: temp buffers %s exceed 4x the activations (%s)", m.name, mib(after.temp), mib(limit))
			}
			if m.name == "mlp" && after.temp > 16<<20 {
				t.Errorf("mlp: temp buffers %s exceed 16 MiB", mib(after.temp))
			}
			if after.temp > before.temp {
				t.Errorf("%s: temp buffers %s with dotgrad, more than GoMLX's gradients take (%s)", m.name, mib(after.temp), mib(before.temp))
			}
			if limit := 4 * m.activationBytes; m.controlOverBound && before.temp <= limit {
				t.Errorf("%s: the control (GoMLX's gradients) takes %s, within 4x the activations (%s): the bound does not bite", m.name, mib(before.temp), mib(limit))
			}
			if m.name == "mlp" && before.temp <= 16<<20 {
				t.Errorf("mlp: the control takes %s, within 16 MiB: the bound does not bite", mib(before.temp))
			}
		})
	}
}

func TestParseBufferAssignment(t *testing.T) {
	text := `BufferAssignment:
allocation 0: size 1605632, output shape is |f32[784,512]|, maybe-live-out:
 value: <20 dot.1 @0> (size=262144,offset=0): f32[128,512]{1,0}
allocation 1: size 1605632, parameter 1, shape |f32[784,512]| at ShapeIndex {}:
allocation 3: size 4, constant:
allocation 4: size 4, thread-local:
allocation 10: size 211943424, preallocated-temp:
allocation 11: size 100:

Total bytes used: 215556124 (205.57MiB)
`
	mem, err := parseBufferAssignment(text)
	if err != nil || mem.temp != 211943424+100 || mem.total != 215556124 {
		t.Errorf("parseBufferAssignment = %+v, %v; want temp %d, total 215556124", mem, err, 211943424+100)
	}
	// Newer XLA: a page on every allocation, the total in the appended memory-usage report.
	text = `BufferAssignment:
allocation 0: size 1605632, page 0, maybe-live-out:
allocation 1: size 1605632, page 0, parameter 1, shape |f32[784,512]| at ShapeIndex {}:
allocation 2: size 4, page 0, thread-local:
allocation 3: size 778752, page 0, preallocated-temp:
BufferAssignment:
Memory Space: default (color=0)
Total bytes: 6556416 (6.25MiB)
`
	mem, err = parseBufferAssignment(text)
	if err != nil || mem.temp != 778752 || mem.total != 6556416 {
		t.Errorf("parseBufferAssignment (paged) = %+v, %v; want temp 778752, total 6556416", mem, err)
	}
	if _, err := parseBufferAssignment("nothing"); err == nil {
		t.Error("parseBufferAssignment accepted text without a total")
	}
}

// TestDotVectorMatrixXLA checks the vector·matrix Dot, which the pure-Go backend does not build and
// GoMLX's own gradient refuses, against finite differences on XLA.
func TestDotVectorMatrixXLA(t *testing.T) {
	b := xlaBackend(t)
	c := dotCase{"Dot/vector.matrix", []int{5}, []int{5, 3}, graph.Dot}
	rng := rand.New(rand.NewPCG(9, 10))
	e := newEvalCase(t, b, c, rng)
	gl, gr, fb := gradientsOf(t, b, c, e, dtypes.Float64)
	if fb != 0 {
		t.Fatalf("fell back %d time(s)", fb)
	}
	fl, fr := finiteDifferences(t, b, c, e)
	assertClose(t, "d/dlhs vs finite differences", gl, fl, 1e-6)
	assertClose(t, "d/drhs vs finite differences", gr, fr, 1e-6)
}
