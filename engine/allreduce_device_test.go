package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// meeting sums the vectors of w goroutine ranks: each call returns once all w have made theirs.
type meeting struct {
	mu          sync.Mutex
	cond        *sync.Cond
	w, arrived  int
	gen         int
	acc, result []float32
}

func newMeeting(w int) *meeting {
	m := &meeting{w: w}
	m.cond = sync.NewCond(&m.mu)
	return m
}

func (m *meeting) sum(v []float32) []float32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.arrived == 0 {
		m.acc = make([]float32, len(v))
	}
	for i, x := range v {
		m.acc[i] += x
	}
	m.arrived++
	if gen := m.gen; m.arrived == m.w {
		m.result, m.arrived = m.acc, 0
		m.gen++
		m.cond.Broadcast()
	} else {
		for gen == m.gen {
			m.cond.Wait()
		}
	}
	return slices.Clone(m.result)
}

// deviceRank is one goroutine rank's DeviceAllReducer: the gradients' values meet the other
// ranks' on the host (a stand-in for the device program) and come back as new tensors.
type deviceRank struct {
	m                *meeting
	meanCalls, calls int
}

var _ DeviceAllReducer = (*deviceRank)(nil)

func (r *deviceRank) AllReduceSum(buf []float32) error {
	r.calls++
	copy(buf, r.m.sum(buf))
	return nil
}

func (r *deviceRank) Size() int { return r.m.w }

func (r *deviceRank) AllReduceMean(grads []*tensors.Tensor, scalars []float32) ([]*tensors.Tensor, []float32, error) {
	r.meanCalls++
	var flat []float32
	for _, g := range grads {
		flat = append(flat, tensors.MustCopyFlatData[float32](g)...)
	}
	sums := r.m.sum(append(flat, scalars...))
	inv := 1 / float32(r.m.w)
	for i := range sums {
		sums[i] *= inv
	}
	out, off := make([]*tensors.Tensor, len(grads)), 0
	for i, g := range grads {
		n := g.Shape().Size()
		out[i] = tensors.FromFlatDataAndDimensions(slices.Clone(sums[off:off+n]), g.Shape().Dimensions...)
		off += n
	}
	return out, sums[off:], nil
}

// rowsOf is an array source of the rows of x (wideIn columns) at batch width.
func rowsOf(t testing.TB, x []float32, width int) *prefetch.ArrayBatches {
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions(x, len(x)/wideIn, wideIn)}, width, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestDeviceReduceMatchesOneProcessOnTheGlobalBatch: two goroutine ranks, each on its own shard
// (batches r, r+2, ... of 32 rows), whose step takes the gradients' mean through a
// DeviceAllReducer, end with the parameters one engine has after the same steps on the global
// batch of 64, within 1e-5, both ranks; every step makes one AllReduceMean and no host sum.
func TestDeviceReduceMatchesOneProcessOnTheGlobalBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const batch, steps = 32, 4
	x := make([]float32, 2*steps*batch*wideIn)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	cache := compilecache.New()
	single := newWideEngine(t, rowsOf(t, x, 2*batch), nil, cache)
	stepper(t, single, rowsOf(t, x, 2*batch))(steps)
	want, err := single.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	m := newMeeting(2)
	ranks := []*deviceRank{{m: m}, {m: m}}
	got := make([]map[string]*tensors.Tensor, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		var shard []float32
		for b := r; b < 2*steps; b += 2 {
			shard = append(shard, x[b*batch*wideIn:(b+1)*batch*wideIn]...)
		}
		src := rowsOf(t, shard, batch)
		e := newWideEngine(t, src, ranks[r], cache)
		wg.Go(func() {
			stepper(t, e, src)(steps)
			got[r], _ = e.Parameters()
		})
	}
	wg.Wait()
	for r, rank := range ranks {
		if rank.meanCalls != steps || rank.calls != 0 {
			t.Errorf("rank %d: %d AllReduceMean and %d host sums over %d steps, want one mean a step and no host sum", r, rank.meanCalls, rank.calls, steps)
		}
		if got[r] == nil {
			t.Fatalf("rank %d read no parameters", r)
		}
		for name, w := range want {
			g, worst := tensors.MustCopyFlatData[float32](got[r][name]), 0.0
			for i, v := range tensors.MustCopyFlatData[float32](w) {
				worst = math.Max(worst, math.Abs(float64(g[i]-v)))
			}
			if worst > 1e-5 {
				t.Errorf("rank %d: %s is %g from one process on the global batch after %d steps", r, name, worst, steps)
			}
		}
	}
}
