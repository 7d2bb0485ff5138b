package roofline

import (
	"fmt"
	"sync"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

// Peak is one device's measured rate of a dense matrix product.
type Peak struct {
	FLOPs  float64      // floating-point operations per second (2·n³ per n×n product)
	N      int          // the products' side
	DType  dtypes.DType // their element type
	Calls  int          // products timed
	Window time.Duration
}

// String is the peak as a console prints it: "61.2 GFLOP/s (Float32 1024² matmul)".
func (p Peak) String() string {
	return fmt.Sprintf("%.1f GFLOP/s (%s %d² matmul)", p.FLOPs/1e9, p.DType, p.N)
}

// Measure times n×n by n×n products of dtype on be for at least minDur (and 3 calls), after one
// untimed call that compiles the program and warms the device. The two inputs stay on the device
// and each result is freed, so the figure is the product's alone: no transfer, no allocation
// growth.
func Measure(be backends.Backend, dtype dtypes.DType, n int, minDur time.Duration) (p Peak, err error) {
	if n < 1 {
		return Peak{}, fmt.Errorf("roofline: matrix side %d: must be >= 1", n)
	}
	defer func() { // GoMLX reports a graph or execution failure by panicking
		if r := recover(); r != nil {
			err = fmt.Errorf("roofline: %d² %s matmul on %s: %v", n, dtype, be.Name(), r)
		}
	}()
	exec, err := graph.NewExec(be, func(x, w *graph.Node) *graph.Node { return graph.Dot(x, w) })
	if err != nil {
		return Peak{}, fmt.Errorf("roofline: %w", err)
	}
	exec = exec.WithName(fmt.Sprintf("nitro_roofline_matmul_%d", n)) // what compile-cache notices name
	defer exec.Finalize()
	x := tensors.FromShape(shapes.Make(dtype, n, n))
	w := tensors.FromShape(shapes.Make(dtype, n, n))
	defer x.FinalizeAll()
	defer w.FinalizeAll()
	for _, t := range []*tensors.Tensor{x, w} {
		if err := t.MaterializeOnDevice(be, false, 0); err != nil {
			return Peak{}, fmt.Errorf("roofline: %w", err)
		}
	}
	call := func() error {
		out, err := exec.Exec(x, w)
		if err != nil {
			return err
		}
		out[0].FinalizeAll()
		return nil
	}
	if err := call(); err != nil {
		return Peak{}, fmt.Errorf("roofline: %w", err)
	}
	calls, start := 0, time.Now()
	for calls < 3 || time.Since(start) < minDur {
		if err := call(); err != nil {
			return Peak{}, fmt.Errorf("roofline: %w", err)
		}
		calls++
	}
	window := time.Since(start)
	return Peak{FLOPs: 2 * float64(n) * float64(n) * float64(n) * float64(calls) / window.Seconds(), N: n, DType: dtype, Calls: calls, Window: window}, nil
}

// cacheKey is one backend and dtype.
type cacheKey struct {
	be    backends.Backend
	dtype dtypes.DType
}

var (
	mu    sync.Mutex
	peaks = map[cacheKey]Peak{}
)

// Cached is Measure at side n for half a second, once per backend and dtype for the process; a
// failed measurement is not kept.
func Cached(be backends.Backend, dtype dtypes.DType, n int) (Peak, error) {
	mu.Lock()
	defer mu.Unlock()
	k := cacheKey{be, dtype}
	if p, ok := peaks[k]; ok {
		return p, nil
	}
	p, err := Measure(be, dtype, n, 500*time.Millisecond)
	if err != nil {
		return Peak{}, err
	}
	peaks[k] = p
	return p, nil
}

// Utilization is the share of devices devices at peak p that modelFLOPs per second make: the
// model FLOPs utilization. It is 0 when nothing was measured.
func Utilization(modelFLOPs float64, p Peak, devices int) float64 {
	if p.FLOPs <= 0 || devices < 1 {
		return 0
	}
	return modelFLOPs / (p.FLOPs * float64(devices))
}

// TransformerFLOPsPerToken is the training FLOPs of one token through a decoder-only
// transformer of weights matrix parameters (embeddings tied to the output count once) with
// layers blocks of width dim over a context of ctx tokens: 6 per weight (2 forward, 4 backward)
// plus the attention scores and their weighted sum, 12·layers·dim·ctx (forward and backward,
// over a full causal window counted as dense, as the usual MFU accounting does).
func TransformerFLOPsPerToken(weights, layers, dim, ctx int) float64 {
	return 6*float64(weights) + 12*float64(layers)*float64(dim)*float64(ctx)
}
