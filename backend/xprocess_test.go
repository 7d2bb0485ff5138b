package backend

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/gomlx/gopjrt/pjrt"

	"github.com/nitro-go/nitro/pjrthook"
)

// cpuXProcess is the sum on 4 CPU devices of one process: world 1, its client reached as the
// production path reaches it.
func cpuXProcess(t *testing.T) (*Resolved, *XProcess) {
	t.Setenv(EnvCPUDevices, "4")
	r, err := Resolve(XLA)
	if err != nil {
		t.Fatal(err)
	}
	x, err := newXProcess(r.Backend, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r, x
}

// The sum program's semantics, as the processes of a run see it: W replicas of it on W of the 4
// CPU devices of one process (all addressable, so gopjrt hands it one argument list per replica),
// several groups and the scalars vector: each replica's output is the sum over the replicas times
// 1/W (the mean the engine wants; at W = 2 exactly as the host path rounds it: sum, then times 1/W
// in float32; at W = 3 the order of the sum is XLA's, so within 1e-6 of it), and the replicas'
// outputs are bit for bit the same.
func TestXProcessProgramSumsOverReplicas(t *testing.T) {
	_, x := cpuXProcess(t)
	xprocessReplicas(t, x, []int{1, 3})
	xprocessReplicas(t, x, []int{0, 2, 3})
}

func xprocessReplicas(t *testing.T, x *XProcess, assignment []int) {
	world := len(assignment)
	ins := []xinput{{"f32", []int{3, 5}}, {"f32", []int{7}}, {"f32", []int{1000}}, {"f32", []int{4}}} // the last: the scalars
	code := xprocessProgram(ins, world, true)
	if !strings.HasPrefix(code, "module @nitro_xprocess_allreduce {") {
		t.Fatalf("the program does not start with the reserved module name:\n%s", code)
	}
	exe, err := x.client.Compile().WithStableHLO([]byte(code)).WithSPMD(world).WithDeviceAssignment(assignment).Done()
	if err != nil {
		t.Fatalf("compiling\n%s: %v", code, err)
	}
	defer exe.Destroy()
	rng := rand.New(rand.NewPCG(3, 4))
	vals := make([][][]float32, world) // [replica][input]
	var args []*pjrt.Buffer
	for r := range world {
		for _, in := range ins {
			n := shapes.Make(dtypes.Float32, in.dims...).Size()
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64()) * 100
			}
			vals[r] = append(vals[r], v)
			b, err := x.client.BufferFromHost().FromFlatDataWithDimensions(v, in.dims).ToDeviceNum(assignment[r]).Done()
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, b)
		}
	}
	outs, err := exe.Execute(args...).DonateNone().Done()
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != world*len(ins) {
		t.Fatalf("%d outputs, want %d", len(outs), world*len(ins))
	}
	for i := range ins {
		var first []float32
		for r := range world {
			got, _, err := outs[r*len(ins)+i].ToFlatDataAndDimensions()
			if err != nil {
				t.Fatal(err)
			}
			g := got.([]float32)
			for k := range g {
				sum := float32(0)
				for q := range world {
					sum += vals[q][i][k]
				}
				want := sum * (1 / float32(world))
				if world == 2 && g[k] != want || math.Abs(float64(g[k]-want)) > 1e-6*math.Max(1, math.Abs(float64(want))) {
					t.Fatalf("W=%d: replica %d, input %d[%d] = %g, want %g", world, r, i, k, g[k], want)
				}
			}
			if first == nil {
				first = g
			} else {
				for k := range g {
					if math.Float32bits(g[k]) != math.Float32bits(first[k]) {
						t.Fatalf("input %d[%d]: replica %d has %x, replica 0 %x", i, k, r, math.Float32bits(g[k]), math.Float32bits(first[k]))
					}
				}
			}
		}
	}
	for _, b := range append(args, outs...) {
		_ = b.Destroy()
	}
}

// The production path over one process (the program's all-reduce over a group of one): every
// gradient comes back on device 0 with its values and shape, an empty one stays empty, the scalars
// come back; the host sums and the broadcast hand back what went in; a program is compiled once
// per signature.
func TestXProcessMarshalsOneProcess(t *testing.T) {
	r, x := cpuXProcess(t)
	grads := []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4, 5, 6}, 2, 3),
		tensors.FromShape(shapes.Make(dtypes.Float32, 0)),
		tensors.FromFlatDataAndDimensions([]float32{-7.5}, 1),
	}
	for _, g := range grads {
		if g.Shape().Size() > 0 {
			if _, err := g.Buffer(r.Backend, 0); err != nil { // on device 0, as a program output is
				t.Fatal(err)
			}
		}
	}
	before := pjrthook.LastWidening()
	for range 2 {
		out, means, err := x.AllReduceMean(grads, []float32{0.25, 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 3 || out[1].Shape().Size() != 0 || !out[0].Shape().Equal(grads[0].Shape()) {
			t.Fatalf("outputs %v", out)
		}
		if got := tensors.MustCopyFlatData[float32](out[0]); got[5] != 6 || got[0] != 1 {
			t.Fatalf("gradient 0 came back as %v", got)
		}
		if got := tensors.MustCopyFlatData[float32](out[2]); got[0] != -7.5 {
			t.Fatalf("gradient 2 came back as %v", got)
		}
		if len(means) != 2 || means[0] != 0.25 || means[1] != 3 {
			t.Fatalf("scalars came back as %v", means)
		}
	}
	if len(x.progs) != 1 {
		t.Fatalf("%d programs compiled for one signature", len(x.progs))
	}
	// The interposer saw the one compile as the reserved program, and could widen the options
	// gopjrt serialized for it (over one process it leaves them as they are).
	if w := pjrthook.LastWidening(); w.Seq != before.Seq+1 || w.Err != nil || w.Replicas != 0 {
		t.Fatalf("the interposer's record after the compile: %+v (before: seq %d)", w, before.Seq)
	}
	f := []float32{1.5, -2}
	d := []float64{1e300, 3}
	b := []byte("rank zero's run")
	if err := x.AllReduceSum(f); err != nil || f[0] != 1.5 || f[1] != -2 {
		t.Fatalf("AllReduceSum: %v, %v", f, err)
	}
	if err := x.AllReduceSum64(d); err != nil || d[0] != 1e300 || d[1] != 3 {
		t.Fatalf("AllReduceSum64: %v, %v", d, err)
	}
	if err := x.Broadcast(b, 0); err != nil || string(b) != "rank zero's run" {
		t.Fatalf("Broadcast: %q, %v", b, err)
	}
	if err := x.Broadcast(b, 1); err == nil {
		t.Fatal("a broadcast from rank 1 of 1 process was taken")
	}
	if _, _, err := x.AllReduceMean([]*tensors.Tensor{tensors.FromFlatDataAndDimensions([]float64{1}, 1)}, nil); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Fatalf("a float64 gradient: %v, want a refusal naming float32", err)
	}
}

// A client of one process is refused as the sum over two: each rank would train alone.
func TestXProcessRefusesAClientThatDoesNotSpan(t *testing.T) {
	r, _ := cpuXProcess(t)
	_, err := NewXProcess(r, 0, 2)
	if err == nil || !strings.Contains(err.Error(), "does not span") || !strings.Contains(err.Error(), "Distribute") {
		t.Fatalf("err = %v, want a refusal naming the fix", err)
	}
	if _, err := NewXProcess(r, 0, 1); err == nil {
		t.Fatal("a sum over one process was taken")
	}
	g, err := Resolve(Go)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewXProcess(g, 0, 2); err == nil || !strings.Contains(err.Error(), "not a PJRT backend") {
		t.Fatalf("the pure-Go backend: %v", err)
	}
}
