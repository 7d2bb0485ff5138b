package core_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// meshOpts are goOpts on the XLA CPU plugin showing 4 devices, running on k of them.
func meshOpts(t *testing.T, k int, more ...core.Option) []core.Option {
	t.Setenv("NITRO_CPU_DEVICES", "4")
	return append(coretest.GoOpts(nil, core.WithBackend("xla"), core.WithDevices(k)), more...)
}

// oneBatchData is a train split of exactly one batch of 32, so that each epoch is one optimizer
// step and History's per-epoch train loss is the per-step loss.
func oneBatchData(t *testing.T) prefetch.Data {
	return prefetch.Data{"train": coretest.Arrays(t, 32, 32, 7, prefetch.ArrayOptions{DropPartial: true})}
}

// TestDevicesEquivalence: the same seed and global batch on 1, 2 and 4 CPU devices give the same
// per-step losses (50 steps) and final parameters, up to the summation order of the gradient's
// all-reduce, with the fused step and with the two-program step.
func TestDevicesEquivalence(t *testing.T) {
	for _, fused := range []bool{true, false} {
		var ref []core.EpochResult
		var refP []float64
		for _, k := range []int{1, 2, 4} {
			opts := meshOpts(t, k, core.WithData(oneBatchData(t)), core.WithMaxEpochs(50), core.WithLearningRate(0.01))
			if fused {
				opts = append(opts, core.WithFusedStep())
			}
			n, err := core.New(&Deep{}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.TrainSteps(2); err != nil {
				t.Fatal(err)
			}
			u2, p2 := n.MeshUploads(), n.Uploads()
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			if p50 := n.Uploads(); p50.Params != p2.Params || p50.OptState != p2.OptState {
				t.Errorf("fused=%v, %d devices: device 0 got parameter or optimizer-state uploads during steps 3..50: %+v after 2, %+v after 50", fused, k, p2, p50)
			}
			if u := n.MeshUploads(); k > 1 {
				// Residency: after the first steps placed the parameters and state, 48 more steps
				// move only batch shards (one per device per step) and scalars.
				for d := 1; d < k; d++ {
					if u.Arrays[d] != u2.Arrays[d] || u.Arrays[d] == 0 {
						t.Errorf("fused=%v, %d devices: device %d got %d array uploads after 2 steps, %d after 50: want the same, non-zero", fused, k, d, u2.Arrays[d], u.Arrays[d])
					}
				}
				if b := n.Uploads().Batch; b != 100 {
					t.Errorf("fused=%v, %d devices: Uploads().Batch = %d after 50 steps of x and y, want 100", fused, k, b)
				}
				for d := 0; d < k; d++ {
					if u.Shards[d] != 100 { // x and y, 50 steps
						t.Errorf("fused=%v, %d devices: device %d got %d batch shards in 50 steps, want 100 (x and y)", fused, k, d, u.Shards[d])
					}
				}
			}
			h, p := n.History(), flatParams(t, n)
			if k == 1 {
				ref, refP = h, p
				continue
			}
			if len(h) != 50 || len(ref) != 50 {
				t.Fatalf("fused=%v, %d devices: %d steps, 1 device %d; want 50", fused, k, len(h), len(ref))
			}
			for i := range h {
				if d := relDiff(h[i].TrainLoss, ref[i].TrainLoss); d > 1e-5 {
					t.Errorf("fused=%v, %d devices: step %d loss %.8g, 1 device %.8g (%.2g relative)", fused, k, i+1, h[i].TrainLoss, ref[i].TrainLoss, d)
				}
			}
			for i := range p {
				if d := math.Abs(p[i] - refP[i]); d > 1e-5 {
					t.Fatalf("fused=%v, %d devices: parameter %d is %.8g, 1 device %.8g", fused, k, i, p[i], refP[i])
				}
			}
			if !(h[49].TrainLoss < h[0].TrainLoss*0.9) {
				t.Errorf("fused=%v, %d devices did not train: loss %g -> %g", fused, k, h[0].TrainLoss, h[49].TrainLoss)
			}
		}
	}
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-12) }

// TestDevicesRefused: more devices than visible names NITRO_CPU_DEVICES; a batch that does not
// divide names both numbers; the config report says chosen, visible and why.
func TestDevicesRefused(t *testing.T) {
	_, err := core.New(&coretest.Reg{}, meshOpts(t, 8, core.WithData(oneBatchData(t)))...)
	coretest.WantErr(t, err, "Devices = 8", "shows 4 devices", "NITRO_CPU_DEVICES")
	d := prefetch.Data{"train": coretest.Arrays(t, 30, 6, 1, prefetch.ArrayOptions{DropPartial: true})}
	_, err = core.New(&coretest.Reg{}, meshOpts(t, 4, core.WithData(d))...)
	coretest.WantErr(t, err, "batch size of 6", "Devices = 4")
	n, err := core.New(&coretest.Reg{}, meshOpts(t, 2, core.WithData(oneBatchData(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if r := n.ConfigReport(); !strings.Contains(r, "2 of 4 visible (run option)") {
		t.Errorf("config report lacks the devices row:\n%s", r)
	}
	n, err = core.New(&coretest.Reg{}, append(coretest.GoOpts(nil, core.WithBackend("xla")), core.WithData(oneBatchData(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if r := n.ConfigReport(); !strings.Contains(r, "1 of 4 visible (default: CPU devices share the cores)") {
		t.Errorf("config report does not give the CPU default and why:\n%s", r)
	}
	// The field is the knob's second source; the run option wins over it.
	n, err = core.New(&fieldDevices{Devices: 4}, append(coretest.GoOpts(nil, core.WithBackend("xla")), core.WithData(oneBatchData(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if r := n.ConfigReport(); !strings.Contains(r, "4 of 4 visible (field Devices)") {
		t.Errorf("config report does not credit the Devices field:\n%s", r)
	}
}

type fieldDevices struct {
	coretest.Reg
	Devices int
}

// TestDevicesEvalPredict: evaluation over the mesh (a val split of 40 in batches of 16: the short
// final batch of 8 is padded to the global 16) matches one device, and Predict and PredictAll on
// a mesh gather every row in order, batches of 5 and 3 rows (not multiples of 4) included.
func TestDevicesEvalPredict(t *testing.T) {
	type result struct {
		val  map[string]float64
		pred []float64
	}
	x, _ := coretest.Synthetic(5, 9)
	var res []result
	for _, k := range []int{1, 4} {
		d := prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{})}
		n, err := core.New(&Deep{}, meshOpts(t, k, core.WithData(d), core.WithMaxEpochs(3))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		before := n.MeshUploads()
		m, err := n.Evaluate("val")
		if err != nil {
			t.Fatal(err)
		}
		if after := n.MeshUploads(); k > 1 && !slices.Equal(before.Arrays, after.Arrays) {
			t.Errorf("evaluation placed parameters again: array uploads per device %v before, %v after", before.Arrays, after.Arrays)
		}
		p, err := n.Predict(prefetch.Batch{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		var flat []float64
		p["pred"].ConstFlatData(func(f any) {
			for _, v := range f.([]float32) {
				flat = append(flat, float64(v))
			}
		})
		// PredictAll over batches of 5, 5 and 3 rows: each padded to 8 on 4 devices, sliced back.
		for pr, err := range n.PredictAll(coretest.Arrays(t, 13, 5, 9, prefetch.ArrayOptions{})) {
			if err != nil {
				t.Fatal(err)
			}
			pr["pred"].ConstFlatData(func(f any) {
				for _, v := range f.([]float32) {
					flat = append(flat, float64(v))
				}
			})
		}
		res = append(res, result{m, flat})
	}
	for name, v := range res[0].val {
		if d := relDiff(res[1].val[name], v); d > 1e-5 {
			t.Errorf("val %s: 4 devices %.8g, 1 device %.8g", name, res[1].val[name], v)
		}
	}
	if len(res[1].pred) != 18 || len(res[0].pred) != 18 {
		t.Fatalf("Predict + PredictAll rows: 1 device %d, 4 devices %d; want 5 + 13", len(res[0].pred), len(res[1].pred))
	}
	for i := range res[0].pred {
		if d := math.Abs(res[1].pred[i] - res[0].pred[i]); d > 1e-5 {
			t.Errorf("Predict/PredictAll row %d: 4 devices %.8g, 1 device %.8g", i, res[1].pred[i], res[0].pred[i])
		}
	}
}

// TestDevicesCheckpointAcrossCounts: a checkpoint holds one copy of each replicated value, so a
// 4-device run's checkpoint resumes on 1 device and a 1-device run's on 4: the restored
// parameters are bitwise those of the run that wrote it at that epoch, and the resumed run ends
// within the all-reduce's rounding of the run that stayed.
func TestDevicesCheckpointAcrossCounts(t *testing.T) {
	for _, c := range [][2]int{{4, 1}, {1, 4}} {
		from, to := c[0], c[1]
		dir := t.TempDir()
		every := core.WithCheckpointer(must(checkpoint.NewEveryN(1, dir, nil)))
		stayed := coretest.New(t, &Deep{}, meshOpts(t, from, core.WithData(shuffled(t)), core.WithMaxEpochs(3), core.WithRunDir(dir), every)...)
		coretest.Train(t, stayed)
		at1 := coretest.New(t, &Deep{}, meshOpts(t, from, core.WithData(shuffled(t)), core.WithMaxEpochs(3))...)
		if err := at1.TrainEpochs(1); err != nil {
			t.Fatal(err)
		}
		entries := manifest(t, dir)
		r := coretest.New(t, &Deep{}, meshOpts(t, to, core.WithData(shuffled(t)), core.WithMaxEpochs(3), core.WithRunDir(t.TempDir()),
			core.WithResume(filepath.Join(dir, entries[0].File)))...)
		sameBits(t, fmt.Sprintf("%d-device checkpoint restored on %d", from, to), flatParams(t, r), flatParams(t, at1))
		coretest.Train(t, r)
		a, b := flatParams(t, r), flatParams(t, stayed)
		for i := range a {
			if d := math.Abs(a[i] - b[i]); d > 1e-5 {
				t.Fatalf("resumed on %d devices: parameter %d ends at %.8g, the run that stayed on %d at %.8g", to, i, a[i], from, b[i])
			}
		}
	}
}

// TestDevicesCacheKey: the device count is in the compile-cache key: on one cache, 1 and 4
// devices are two entries of the fused step, and each count then hits its own.
func TestDevicesCacheKey(t *testing.T) {
	cache := newCache()
	for i, k := range []int{1, 4, 1, 4} {
		n, err := core.New(&coretest.Reg{}, append(meshOpts(t, k, core.WithData(oneBatchData(t)), core.WithFusedStep()), core.WithCache(cache))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		want := min(i+1, 2)
		if s := cache.Stats(); s.Misses != want || s.Entries != want {
			t.Errorf("after run %d (%d devices): cache %+v, want %d misses and entries", i+1, k, s, want)
		}
	}
}

// TestDevicesManualAndAccum: manual mode (TrainStep, two groups, a Device field) and the
// two-program step with Accum = 2 run over 4 devices as on 1: the same per-epoch losses and final
// parameters within 1e-5 (the shards' partial gradients summed in another order).
func TestDevicesManualAndAccum(t *testing.T) {
	cases := []struct {
		name string
		e    func() any
		opts []core.Option
	}{
		{"manual", func() any { return newManualDeep() }, nil},
		{"accum 2", func() any { return &Deep{} }, []core.Option{core.WithAccum(2)}},
	}
	for _, c := range cases {
		var ref []core.EpochResult
		var refP []float64
		for _, k := range []int{1, 4} {
			n, err := core.New(c.e(), meshOpts(t, k, append(c.opts, core.WithData(coretest.Data(t, 32)), core.WithMaxEpochs(4))...)...)
			if err != nil {
				t.Fatalf("%s, %d devices: %v", c.name, k, err)
			}
			if err := n.Train(); err != nil {
				t.Fatalf("%s, %d devices: %v", c.name, k, err)
			}
			h, p := n.History(), flatParams(t, n)
			if k == 1 {
				ref, refP = h, p
				continue
			}
			if u := n.MeshUploads(); u.Shards[3] == 0 {
				t.Errorf("%s: no batch shard reached device 3: %+v", c.name, u)
			}
			for i := range h {
				if d := relDiff(h[i].TrainLoss, ref[i].TrainLoss); d > 1e-5 {
					t.Errorf("%s: epoch %d train loss %.8g on 4 devices, %.8g on 1", c.name, i+1, h[i].TrainLoss, ref[i].TrainLoss)
				}
			}
			for i := range p {
				if d := math.Abs(p[i] - refP[i]); d > 1e-5 {
					t.Fatalf("%s: parameter %d is %.8g on 4 devices, %.8g on 1", c.name, i, p[i], refP[i])
				}
			}
		}
	}
}
