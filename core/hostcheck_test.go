package core_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/markers"
)

// Experiments whose traced hooks read a Host field (the forgotten marker), one per hook, plus
// the marked fields that must never be refused.
type (
	HostInMetrics struct {
		coretest.Base
		Offset float64
	}
	HostInTrainMetrics struct {
		coretest.Base
		Offset float64
	}
	// HostArrayInLoss bakes a Host array larger than the size below which GoMLX keeps a
	// constant's values: it must be compared by value, not by shape.
	HostArrayInLoss struct {
		coretest.Base
		Weights [64]float32
	}
	// MarkedInLoss reads a GraphConst and a Device field in Loss: both are allowed.
	MarkedInLoss struct {
		coretest.Base
		Power  float64 `nitro:"graphconst"`
		Weight markers.Device[float32]
	}
	// GlobalInLoss reads a package variable: nothing in the experiment or the key moves with it.
	GlobalInLoss struct{ coretest.Base }
)

var globalLossScale float64

func (e *HostInMetrics) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	return map[string]hooks.Metric{"shifted": {Sum: graph.AddScalar(coretest.MSE(out["pred"], in.Y), e.Offset)}}
}

func (e *HostInTrainMetrics) TrainMetrics(out core.Outputs, in coretest.Tgt) map[string]*graph.Node {
	return map[string]*graph.Node{"shifted": graph.AddScalar(coretest.MSE(out["pred"], in.Y), e.Offset)}
}

func (e *HostArrayInLoss) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	w := graph.ReduceAllSum(graph.Const(out["pred"].Graph(), e.Weights[:]))
	return graph.Add(coretest.MSE(out["pred"], in.Y), graph.ConvertDType(w, out["pred"].DType()))
}

func (e *MarkedInLoss) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	l := graph.MulScalar(coretest.MSE(out["pred"], in.Y), e.Power)
	return graph.Mul(l, graph.ConvertDType(e.Weight.Node(), l.DType()))
}

func (*GlobalInLoss) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return graph.MulScalar(coretest.MSE(out["pred"], in.Y), globalLossScale)
}

// sweepNew builds a handle for e on backend with the shared cache c and runs fn on it.
func sweepNew(t *testing.T, backend string, c *compilecache.Cache, e any, valN int) (*core.Nitro, error) {
	t.Helper()
	return core.New(e, append(coretest.GoOpts(c, core.WithData(coretest.Data(t, valN)), core.WithMaxEpochs(1)), core.WithBackend(backend))...)
}

// A sweep over a Host field read in a traced hook, zero first: the zero value passes (the
// program from the Host-zeroed view is right for it), the program is cached, and every later
// value is refused naming the field, although its handle finds the program in the cache.
func TestHostSweepZeroFirstIsRefusedOnCacheHits(t *testing.T) {
	type verb struct {
		name string
		run  func(*core.Nitro) error
	}
	train := verb{"Train", func(n *core.Nitro) error { return n.Train() }}
	validate := verb{"Validate", func(n *core.Nitro) error { _, err := n.Validate(); return err }}
	cases := []struct {
		hook  string
		field string
		make  func(v float64) any
		verbs []verb
	}{
		{"Loss", "Scale", func(v float64) any { return &HostInLoss{Scale: v} }, []verb{train, validate}},
		{"Metrics", "Offset", func(v float64) any { return &HostInMetrics{Offset: v} }, []verb{validate}},
		{"TrainMetrics", "Offset", func(v float64) any { return &HostInTrainMetrics{Offset: v} }, []verb{train}},
	}
	for _, be := range coretest.HostCheckBackends(t) {
		for _, tc := range cases {
			for _, vb := range tc.verbs {
				t.Run(be+"/"+tc.hook+"/"+vb.name, func(t *testing.T) {
					c := compilecache.New()
					for _, v := range []float64{0, 1, 3} {
						n, err := sweepNew(t, be, c, tc.make(v), 32)
						if err != nil {
							t.Fatalf("New at %s=%v: %v", tc.field, v, err)
						}
						err = vb.run(n)
						if v == 0 {
							if err != nil {
								t.Fatalf("%s at %s=0: %v", vb.name, tc.field, err)
							}
							continue
						}
						coretest.WantHostRead(t, err, tc.field)
						if st := c.Stats(); st.Hits == 0 {
							t.Fatalf("%s=%v: the refusal did not come from a cache hit (stats %+v): the test lost its point", tc.field, v, st)
						}
					}
				})
			}
		}
	}
}

// Forward is checked at every New, so a zero-first sweep is refused at setup.
func TestHostSweepInForwardIsRefusedAtEveryNew(t *testing.T) {
	for _, be := range coretest.HostCheckBackends(t) {
		c := compilecache.New()
		if _, err := sweepNew(t, be, c, &HostInForward{Scale: 0}, 0); err != nil {
			t.Fatalf("%s: New at Scale=0: %v", be, err)
		}
		_, err := sweepNew(t, be, c, &HostInForward{Scale: 1}, 0)
		coretest.WantHostRead(t, err, "Scale")
	}
}

// A Host [64]float32 read in Loss, non-zero from the very first run: the constant is above the
// size GoMLX keeps values for, so only a by-value comparison sees it.
func TestHostArrayAboveConstThresholdIsRefused(t *testing.T) {
	if len(HostArrayInLoss{}.Weights) < graph.MinConstValueSizeToKeep {
		t.Fatalf("the array (%d) must be at least graph.MinConstValueSizeToKeep (%d)", len(HostArrayInLoss{}.Weights), graph.MinConstValueSizeToKeep)
	}
	for _, be := range coretest.HostCheckBackends(t) {
		e := &HostArrayInLoss{}
		for i := range e.Weights {
			e.Weights[i] = 1
		}
		n, err := sweepNew(t, be, compilecache.New(), e, 0)
		if err != nil {
			t.Fatalf("%s: New: %v", be, err)
		}
		coretest.WantHostRead(t, n.Train(), "Weights")
	}
}

// GraphConst and Device fields read in Loss are never refused: a GraphConst sweep recompiles per
// value, a Device sweep reuses the program (and the check on the hit passes).
func TestMarkedFieldSweepsAreNeverRefused(t *testing.T) {
	for _, be := range coretest.HostCheckBackends(t) {
		c := compilecache.New()
		for _, p := range []float64{1, 2, 3} {
			n, err := sweepNew(t, be, c, &MarkedInLoss{Power: p, Weight: markers.NewDevice[float32](1)}, 32)
			if err != nil {
				t.Fatalf("%s: New at Power=%v: %v", be, p, err)
			}
			if err := n.Train(); err != nil {
				t.Fatalf("%s: Train at Power=%v: %v", be, p, err)
			}
		}
		before := c.Stats()
		for _, w := range []float32{0, 0.5, 4} {
			n, err := sweepNew(t, be, c, &MarkedInLoss{Power: 3, Weight: markers.NewDevice(w)}, 32)
			if err != nil {
				t.Fatalf("%s: New at Weight=%v: %v", be, w, err)
			}
			if err := n.Train(); err != nil {
				t.Fatalf("%s: Train at Weight=%v: %v", be, w, err)
			}
			if _, err := n.Validate(); err != nil {
				t.Fatalf("%s: Validate at Weight=%v: %v", be, w, err)
			}
		}
		after := c.Stats()
		if after.Entries != before.Entries || after.Hits == before.Hits { // Train validated already: eval is cached
			t.Errorf("%s: the Device sweep compiled: stats before %+v, after %+v; want no new program and hits only", be, before, after)
		}
	}
}

// A hook that reads a package variable moves nothing the key or the Host check can see; the
// program from the cache no longer matches a trace of the handle in hand, and that is refused.
func TestCachedProgramThatNoLongerTracesIsRefused(t *testing.T) {
	defer func() { globalLossScale = 0 }()
	for _, be := range coretest.HostCheckBackends(t) {
		c := compilecache.New()
		globalLossScale = 1
		n, err := sweepNew(t, be, c, &GlobalInLoss{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		globalLossScale = 2
		n, err = sweepNew(t, be, c, &GlobalInLoss{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		coretest.WantErr(t, n.Train(), "gradient program", "no longer traces to", "global or a captured variable", "Reset")
	}
}

// Two Nitros of one experiment on different backends share a cache but never a program: each
// program is compiled for its backend, and the key says which.
func TestBackendIsInTheKey(t *testing.T) {
	bes := coretest.HostCheckBackends(t)
	if len(bes) < 2 {
		t.Skip("needs both backends (XLA absent outside CI)")
	}
	c := compilecache.New()
	for _, be := range bes {
		n, err := sweepNew(t, be, c, &coretest.Reg{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatalf("%s: %v", be, err)
		}
	}
	if st := c.Stats(); st.Hits != 0 || st.Entries != 4 {
		t.Fatalf("stats %+v: want 4 programs (gradient and optimizer per backend) and no hit across backends", st)
	}
	found := false
	for _, e := range c.Explanations() {
		found = found || strings.Contains(e, "backend")
	}
	if !found {
		t.Errorf("no miss explanation names the backend: %v", c.Explanations())
	}
}
