package core

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/prefetch"
	"k8s.io/klog/v2"
)

// syncBuffer is the klog sink: klog writes from the compiling goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stableHLOOf runs f with GoMLX's XLA builder logging each program it compiles (klog level 2,
// the StableHLO text handed to PJRT) and returns the log.
func stableHLOOf(t *testing.T, f func()) string {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	var out syncBuffer
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "v": "2"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(&out)
	defer func() {
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(nil)
	}()
	f()
	return out.String()
}

// precisionNet is a small classifier with a convolution and two Dense layers: x [n, 16] is
// viewed as a 4x4 one-channel image; y is an Int32 class in [0, 3).
type precisionNet struct{}

type precisionIn struct {
	X *graph.Node `batch:"x"`
}

func (*precisionNet) BuildModel(*context.Context) error { return nil }

func (*precisionNet) Forward(ctx *context.Context, in precisionIn) Outputs {
	img := graph.Reshape(in.X, in.X.Shape().Dimensions[0], 4, 4, 1)
	c := activations.Relu(layers.Convolution(ctx.In("conv"), img).Filters(2).KernelSize(3).PadSame().Done())
	h := activations.Relu(layers.Dense(ctx.In("hidden"), graph.Reshape(c, c.Shape().Dimensions[0], -1), true, 8))
	return Outputs{"logits": layers.Dense(ctx.In("out"), h, true, 3)}
}

func (*precisionNet) Loss(out Outputs, in evalShareTgt) *graph.Node {
	return losses.SparseCategoricalCrossEntropyLogits([]*graph.Node{graph.ExpandAxes(in.Y, -1)}, []*graph.Node{out["logits"]})
}

func precisionBatches(t testing.TB, n, batch int, seed uint64) *prefetch.ArrayBatches {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	xs, ys := make([]float32, n*16), make([]int32, n)
	for i := range ys {
		ys[i] = int32(r.IntN(3))
		for j := range 16 {
			xs[i*16+j] = float32(r.NormFloat64()) + float32(ys[i]) // the class shifts every pixel
		}
	}
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions(xs, n, 16), "y": tensors.FromFlatDataAndDimensions(ys, n)}, batch, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// products counts the StableHLO dot_general and convolution ops of text by operand dtype: an
// op's type line is the first "} : (" line after it. convs counts the bfloat16 convolutions.
func products(text string) (bf16, f32, convs int) {
	op := ""
	for _, l := range strings.Split(text, "\n") {
		for _, name := range []string{"dot_general", "convolution"} {
			if strings.Contains(l, `"stablehlo.`+name+`"`) {
				op = name
			}
		}
		if op != "" && strings.Contains(l, "} : (") {
			types := l[strings.Index(l, "} : ("):]
			switch {
			case strings.Count(types, "xbf16>") >= 3: // both operands and the result
				bf16++
				if op == "convolution" {
					convs++
				}
			case strings.Count(types, "xf32>") >= 3:
				f32++
			}
			op = ""
		}
	}
	return bf16, f32, convs
}

// mainSignatures are the lines declaring each compiled program's inputs and outputs.
func mainSignatures(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "func.func @main(") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// TestMixedPrecisionComputesProductsInBF16: under bf16 every program's dot products and
// convolutions (forward and backward) take and give bfloat16 and none is float32, while every
// program's inputs and outputs (parameters, gradients, optimizer state, loss, metrics) stay
// float32, as do the parameters and the optimizer state on the device; under f32 no program
// holds a bfloat16 value at all. Read from the StableHLO text GoMLX hands to PJRT.
func TestMixedPrecisionComputesProductsInBF16(t *testing.T) {
	if _, err := backend.Resolve(backend.XLA); err != nil {
		prereq.XLAPlugin.Need(t, err) // the text is the XLA builder's: absent is a skip, a failure in CI
	}
	for _, mode := range []string{"bf16", "f32"} {
		t.Run(mode, func(t *testing.T) {
			var n *Nitro
			text := stableHLOOf(t, func() {
				var err error
				n, err = New(&precisionNet{}, WithBackend(backend.XLA), Quiet(), WithCache(compilecache.New()), WithoutLogger(), WithoutCheckpoints(), WithMixedPrecision(mode),
					WithData(prefetch.Data{"train": precisionBatches(t, 64, 16, 1), "val": precisionBatches(t, 32, 16, 2)}))
				if err != nil {
					t.Fatal(err)
				}
				if err := n.Train(); err != nil {
					t.Fatal(err)
				}
			})
			sigs := mainSignatures(text)
			if len(sigs) < 3 { // gradient, optimizer, eval (and GoMLX's initializers)
				t.Fatalf("logged %d programs, want the gradient, optimizer and eval programs at least:\n%s", len(sigs), text)
			}
			bf, f, convs := products(text)
			if mode == "bf16" {
				if bf < 6 || f != 0 || convs < 2 { // forward: conv + 2 dots; backward: the conv's and the dots' gradients
					t.Errorf("bf16: %d bfloat16 products (%d convolutions) and %d float32 ones, want >= 6 (>= 2) and 0", bf, convs, f)
				}
				for _, s := range sigs {
					if strings.Contains(s, "bf16") {
						t.Errorf("bf16: a program takes or returns bfloat16 (parameters, gradients, state and loss must stay float32): %s", s)
					}
				}
			} else if bf != 0 || f < 6 || strings.Contains(text, "bf16") {
				t.Errorf("f32: %d bfloat16 and %d float32 products, want 0 and >= 6, and no bf16 anywhere", bf, f)
			}
			lossFirst := false
			for _, s := range sigs {
				lossFirst = lossFirst || (strings.Contains(s, "%batch_y") && strings.Contains(s, "-> (tensor<f32>, "))
			}
			if !lossFirst {
				t.Errorf("%s: no gradient program returning a float32 scalar loss first:\n%s", mode, strings.Join(sigs, "\n"))
			}
			ts, err := n.eng.StateTensors(engine.WholePart) // parameters, optimizer state, layer state
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range ts {
				if strings.HasPrefix(x.Name, "param/") || strings.HasPrefix(x.Name, "opt/") {
					if x.DType != dtypes.Float32 {
						t.Errorf("%s: %s is %s, want Float32", mode, x.Name, x.DType)
					}
				}
			}
		})
	}
}
