package core_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/collective"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/engine"
)

// The collective core takes from a client that spans the processes serves both of core's needs.
var (
	_ core.Collective         = (*backend.XProcess)(nil)
	_ engine.DeviceAllReducer = (*backend.XProcess)(nil)
)

// deviceRank is an in-memory rank that also takes a step's gradients as tensors, as
// backend.XProcess does on the device: the values meet the other ranks' through the rank's host
// sum here, a stand-in for the program.
type deviceRank struct {
	*localRank
	means *atomic.Int64
}

// localRank names the embedded rank so that its Rank method is promoted (a field named Rank would hide it).
type localRank = collective.Rank

func (d deviceRank) Via() string { return "a device all-reduce (test)" }

func (d deviceRank) AllReduceMean(grads []*tensors.Tensor, scalars []float32) ([]*tensors.Tensor, []float32, error) {
	d.means.Add(1)
	var buf []float32
	for _, g := range grads {
		buf = append(buf, tensors.MustCopyFlatData[float32](g)...)
	}
	buf = append(buf, scalars...)
	if err := d.AllReduceSum(buf); err != nil {
		return nil, nil, err
	}
	inv := 1 / float32(d.Size())
	for i := range buf {
		buf[i] *= inv
	}
	out, off := make([]*tensors.Tensor, len(grads)), 0
	for i, g := range grads {
		n := g.Shape().Size()
		out[i] = tensors.FromFlatDataAndDimensions(slices.Clone(buf[off:off+n]), g.Shape().Dimensions...)
		off += n
	}
	return out, buf[off:], nil
}

// Two ranks whose collective takes the gradients as tensors (the path a CUDA client spanning the
// processes takes) train what one process trains on the global batch, as the host sum does, with
// one tensor mean a step on each rank; the config report names the collective.
func TestDeviceCollectiveMatchesOneProcessOnTheGlobalBatch(t *testing.T) {
	var means atomic.Int64
	ns := matchesOneProcess(t, func(r *collective.Rank) core.Collective { return deviceRank{r, &means} })
	if steps := int64(ns[0].Step()); means.Load() != 2*steps || steps == 0 {
		t.Errorf("%d tensor means over %d steps on 2 ranks, want one a step on each", means.Load(), steps)
	}
	if !strings.Contains(ns[1].ConfigReport(), "summed over 2 processes (a device all-reduce (test))") {
		t.Errorf("config report:\n%s", ns[1].ConfigReport())
	}
}
