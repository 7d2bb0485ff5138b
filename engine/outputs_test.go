package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// newGroupedEngine is the accum MLP with a parameter group per layer ("h0", "out").
func newGroupedEngine(t testing.TB) *Engine {
	t.Helper()
	return newTestEngine(t, testRun{exp: &accumMLP{}, forward: accumForward, loss: accumLoss, data: zeroBatches(t), backend: "go",
		cache: compilecache.New(), grouper: func(kp []string) string { return kp[0] }})
}

// TestProgramsDeclareTheirOutputNames: each training program names every output as outputs.go
// says, in its order.
func TestProgramsDeclareTheirOutputNames(t *testing.T) {
	e := newGroupedEngine(t)
	keys := []string{"x", "y"}
	layer := "state//#rngState"
	updates := []string{"params/h0/0", "params/out/0", "opt/h0/0.radam.mu/0", "opt/h0/0.radam.nu/0", "opt/out/0.radam.mu/0", "opt/out/0.radam.nu/0"}
	for _, c := range []struct {
		get  func() (*program, error)
		want []string
	}{
		{func() (*program, error) { return e.gradientProgram(8, keys) }, []string{"loss", "grads/h0/0", "grads/out/0", layer}},
		{e.optimizerProgram, updates},
		{func() (*program, error) { return e.trainStepProgram(8, keys) }, append(append([]string{"loss"}, updates...), layer)},
	} {
		p, err := c.get()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.outputs, c.want) {
			t.Errorf("the %s program declares %q, want %q", p.kind, p.outputs, c.want)
		}
	}
}

// TestReorderedOutputsFailNamingThem: a gradient program that declares its two groups' gradients
// in the other order (a builder reordered them) makes the step fail naming the program and the
// output, instead of handing one group the other's gradient; so do a missing name and an output
// the program does not return.
func TestReorderedOutputsFailNamingThem(t *testing.T) {
	keys := []string{"x", "y"}
	for _, c := range []struct {
		name    string
		corrupt func([]string) []string
		want    []string
	}{
		{"reordered", func(o []string) []string {
			o[1], o[2] = o[2], o[1]
			return o
		}, []string{"gradient program declares", `where its reader expects "grads/out/0" (after "grads/h0/0"; it declares that at output 1)`}},
		{"missing", func(o []string) []string {
			o[0] = "lost"
			return o
		}, []string{`gradient program has no output "loss"`, "lost, grads/h0/0"}},
		{"extra", func(o []string) []string {
			return append(o, "metric/extra")
		}, []string{"the gradient program returned 4 outputs and declares 5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newGroupedEngine(t)
			p, err := e.gradientProgram(8, keys)
			if err != nil {
				t.Fatal(err)
			}
			bad := *p
			if err := bad.declare(c.corrupt(slices.Clone(p.outputs))); err != nil {
				t.Fatal(err)
			}
			e.scratch.last.p = &bad // the step finds it as the program it looked up last
			src := zeroBatches(t)
			_, err = e.Step(1, keys, func() (map[string]*tensors.Tensor, error) {
				b, err := src.BatchAt(0)
				if err != nil {
					return nil, err
				}
				return e.Place(b, keys)
			}, false)
			if err == nil {
				t.Fatalf("a step read the outputs of a program declaring %q", bad.outputs)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestResultsRefuseWhatTheProgramDoesNotDeclare checks the reader alone: a name the program does
// not declare, a run out of order, an output read twice or left unread, a count that differs.
func TestResultsRefuseWhatTheProgramDoesNotDeclare(t *testing.T) {
	e := &Engine{}
	p := &program{kind: "test"}
	if err := p.declare([]string{"loss", "grads/g/0", "grads/g/1", "metric/a", "metric/b"}); err != nil {
		t.Fatal(err)
	}
	ts := make([]*tensors.Tensor, 5)
	for i := range ts {
		ts[i] = tensors.FromScalar(float32(i))
	}
	read := func(f func(r *results)) error {
		r := e.results(p, ts)
		f(&r)
		return r.done()
	}
	all := func(r *results) {
		r.one("loss")
		r.run([]string{"grads/g/0", "grads/g/1"})
		r.prefixed(metricOut)
	}
	if err := read(all); err != nil {
		t.Fatalf("reading every output as declared: %v", err)
	}
	r := e.results(p, ts)
	if got := r.run([]string{"grads/g/0", "grads/g/1"}); len(got) != 2 || got[0] != ts[1] || got[1] != ts[2] {
		t.Errorf("run: got %v, want outputs 1 and 2", got)
	}
	if names, got := r.prefixed(metricOut); !slices.Equal(names, []string{"metric/a", "metric/b"}) || got[0] != ts[3] {
		t.Errorf("prefixed: got %q %v", names, got)
	}
	for _, c := range []struct {
		name string
		read func(r *results)
		want string
	}{
		{"undeclared", func(r *results) { all(r); r.one("grads/g/2") }, `test program has no output "grads/g/2"`},
		{"out of order", func(r *results) { r.one("loss"); r.run([]string{"grads/g/1", "grads/g/0"}) },
			`declares "metric/a" at output 3, where its reader expects "grads/g/0" (after "grads/g/1"; it declares that at output 1)`},
		{"twice", func(r *results) { all(r); r.one("loss") }, `output "loss" of the test program is read twice`},
		{"unread", func(r *results) { r.one("loss"); r.prefixed(metricOut) }, `output "grads/g/0" is read by nothing`},
	} {
		if err := read(c.read); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
	if r := e.results(p, ts[:4]); r.done() == nil || !strings.Contains(r.done().Error(), "returned 4 outputs and declares 5") {
		t.Errorf("a short run: %v", r.done())
	}
	if err := (&program{kind: "test"}).declare([]string{"loss", "loss"}); err == nil {
		t.Error("a program declared one name twice")
	}
}

// zeroBatches is four batches of 8 rows of zeros for the accum MLP.
func zeroBatches(t testing.TB) *prefetch.ArrayBatches {
	t.Helper()
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(make([]float32, 32*8), 32, 8),
		"y": tensors.FromFlatDataAndDimensions(make([]float32, 32), 32, 1),
	}, 8, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// BenchmarkReadOutputs times what reading a fused step program's outputs by name costs a step
// (results, takeUpdates, the layer state, the metrics, done) on the two-group MLP, with host
// scalars standing in for the outputs: the host work that replaced slicing them by position.
func BenchmarkReadOutputs(b *testing.B) {
	e := newGroupedEngine(b)
	p, err := e.trainStepProgram(8, []string{"x", "y"})
	if err != nil {
		b.Fatal(err)
	}
	outs := make([]*tensors.Tensor, len(p.outputs))
	for i := range outs {
		outs[i] = tensors.FromScalar(float32(i))
	}
	b.ReportAllocs()
	for b.Loop() {
		r := e.results(p, outs)
		r.one(lossOut)
		e.takeUpdates(&r)
		r.run(e.trainNames().layer)
		r.prefixed(metricOut)
		if err := r.done(); err != nil {
			b.Fatal(err)
		}
	}
}
