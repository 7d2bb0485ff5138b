package integration_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/pjrthook"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// aliasProbe compiles an update-shaped program (p, s, x) -> (p - 0.1·x·s, 0.9·s + x, Σx) under
// the module name given; the first two outputs replace the first two inputs.
func aliasProbe(t *testing.T, r *backend.Resolved, name string) *graph.Graph {
	t.Helper()
	g := graph.NewGraph(r.Backend, name)
	vec := shapes.Make(dtypes.Float32, aliasN)
	p, s, x := graph.Parameter(g, "p", vec), graph.Parameter(g, "s", vec), graph.Parameter(g, "x", vec)
	newP := graph.Sub(p, graph.Mul(graph.MulScalar(x, 0.1), s))
	newS := graph.Add(graph.MulScalar(s, 0.9), x)
	g.Compile(newP, newS, graph.ReduceAllSum(x))
	return g
}

const aliasN = 4099

// run executes g on the three tensors, donating those marked.
func runProbe(t *testing.T, r *backend.Resolved, g *graph.Graph, in []*tensors.Tensor, donate []bool) []*tensors.Tensor {
	t.Helper()
	bufs := make([]backends.Buffer, len(in))
	for i, tt := range in {
		var err error
		if donate[i] {
			bufs[i], err = tt.DonateBuffer(r.Backend, 0)
		} else {
			bufs[i], err = tt.Buffer(r.Backend, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return g.RunWithBuffers(bufs, donate, 0)
}

func probeInputs(seed int) []*tensors.Tensor {
	mk := func(k int) *tensors.Tensor {
		v := make([]float32, aliasN)
		for i := range v {
			v[i] = float32(math.Sin(float64(seed*7+k*3+i))) * 1.7
		}
		return tensors.FromValue(v)
	}
	return []*tensors.Tensor{mk(0), mk(1), mk(2)}
}

func bitsOf(t *testing.T, tt *tensors.Tensor) []uint32 {
	t.Helper()
	var out []uint32
	if err := tt.ConstFlatData(func(flat any) {
		for _, f := range flat.([]float32) {
			out = append(out, math.Float32bits(f))
		}
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func equalBits(t *testing.T, what string, a, b *tensors.Tensor) {
	t.Helper()
	x, y := bitsOf(t, a), bitsOf(t, b)
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("%s: element %d differs: %08x vs %08x", what, i, x[i], y[i])
		}
	}
}

// TestAliasingKeepsValues compiles one program twice through the real plugin, once with its
// update outputs declared as aliases of their inputs and once not, and runs both for several
// steps (outputs fed back as the next inputs): every output is bit-equal, whether the aliased
// program's inputs are donated (the output written in place) or not (the plugin copies, and the
// caller's input stays as it was).
func TestAliasingKeepsValues(t *testing.T) {
	r := requireXLA(t)
	pjrthook.DeclareAliases("nitro_alias_probe", []pjrthook.Alias{{Input: 0, Output: 0}, {Input: 1, Output: 1}})
	defer pjrthook.DeclareAliases("nitro_alias_probe", nil)
	before := pjrthook.LastAliasing().Seq
	aliased := aliasProbe(t, r, "nitro_alias_probe")
	defer aliased.Finalize()
	if a := pjrthook.LastAliasing(); a.Seq == before || a.Module != "nitro_alias_probe" || a.Pairs != 2 || a.Err != nil {
		t.Fatalf("the interposer did not alias the probe: %+v", a)
	}
	plain := aliasProbe(t, r, "nitro_alias_plain")
	defer plain.Finalize()

	// Donated: the aliased program updates p and s in place, step after step.
	a, b := probeInputs(1), probeInputs(1)
	for step := range 5 {
		x1, x2 := probeInputs(10 + step)[2], probeInputs(10 + step)[2]
		outA := runProbe(t, r, aliased, []*tensors.Tensor{a[0], a[1], x1}, []bool{true, true, false})
		outB := runProbe(t, r, plain, []*tensors.Tensor{b[0], b[1], x2}, []bool{true, true, false})
		for k := range outA {
			equalBits(t, "donated run, output", outA[k], outB[k])
		}
		a, b = outA, outB
	}

	// Not donated: the plugin must leave the caller's inputs intact.
	in := probeInputs(3)
	keep := []([]uint32){bitsOf(t, in[0]), bitsOf(t, in[1])}
	for _, tt := range in {
		if _, err := tt.Buffer(r.Backend, 0); err != nil { // on the device only, as a step's state is
			t.Fatal(err)
		}
		tt.FinalizeLocal()
	}
	outA := runProbe(t, r, aliased, in, []bool{false, false, false})
	outB := runProbe(t, r, plain, probeInputs(3), []bool{false, false, false})
	for k := range outA {
		equalBits(t, "undonated run, output", outA[k], outB[k])
	}
	for k := range 2 {
		got := bitsOf(t, in[k]) // read back from its device buffer
		for i := range got {
			if got[i] != keep[k][i] {
				t.Fatalf("undonated aliased input %d changed at element %d: the plugin wrote the output over it", k, i)
			}
		}
	}
}

// TestAliasedProgramFromDisk: the disk cache keys the program as the plugin compiled it, aliases
// included. The probe's text compiled without its declaration is another entry; compiled again
// with it, it loads from disk, and the loaded executable still gives the plain program's bits.
func TestAliasedProgramFromDisk(t *testing.T) {
	r := requireXLA(t)
	prev := pjrthook.Disk()
	dir := t.TempDir()
	dc, err := diskcache.Open(diskcache.Options{Dir: dir, Notice: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	pjrthook.SetDisk(dc)
	defer func() { pjrthook.Flush(); pjrthook.SetDisk(prev) }()
	const name = "nitro_alias_disk_probe"
	entries := func() int {
		t.Helper()
		pjrthook.Flush()
		_, n, err := diskcache.Size(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	pjrthook.DeclareAliases(name, []pjrthook.Alias{{Input: 0, Output: 0}, {Input: 1, Output: 1}})
	defer pjrthook.DeclareAliases(name, nil)
	aliasProbe(t, r, name).Finalize()
	pjrthook.DeclareAliases(name, nil)
	aliasProbe(t, r, name).Finalize()
	if n := entries(); n != 2 {
		t.Fatalf("%d entries on disk, want 2: the aliased and the plain text are two programs", n)
	}
	pjrthook.DeclareAliases(name, []pjrthook.Alias{{Input: 0, Output: 0}, {Input: 1, Output: 1}})
	before := pjrthook.Stats()
	loaded := aliasProbe(t, r, name)
	defer loaded.Finalize()
	if after := pjrthook.Stats(); after.FromDisk != before.FromDisk+1 || after.Compiled != before.Compiled {
		t.Fatalf("the aliased program again: counts %+v then %+v, want one load from disk", before, after)
	}
	plain := aliasProbe(t, r, "nitro_alias_plain")
	defer plain.Finalize()
	a, b := probeInputs(5), probeInputs(5)
	outA := runProbe(t, r, loaded, a, []bool{true, true, false})
	outB := runProbe(t, r, plain, b, []bool{true, true, false})
	for k := range outA {
		equalBits(t, "loaded aliased program, output", outA[k], outB[k])
	}
}
