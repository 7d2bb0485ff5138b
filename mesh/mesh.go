package mesh

import (
	"fmt"
	"sync"
	"weak"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Axis is the mesh's one axis: the batch is sharded along it.
const Axis = "data"

// Mesh is n local devices (0..n-1) with the copies of the replicated values it has placed.
type Mesh struct {
	n          int
	backend    backends.Backend
	dm         *distributed.DeviceMesh
	replicated *distributed.ShardingSpec
	batch      *distributed.ShardingSpec
	copies     map[weak.Pointer[tensors.Tensor]]*replicas

	mu     sync.Mutex                                         // guards staged: Stage runs on the prefetch goroutine
	staged map[weak.Pointer[tensors.Tensor]][]*tensors.Tensor // a batch field's shards, placed ahead of its run

	ReplicaUploads []int // per device: replicated arrays placed there (device 0: by the caller)
	ScalarUploads  []int // per device: replicated scalars (step count, hyperparameters) placed there
	ShardUploads   []int // per device: batch shards placed there
}

// replicas is one value's copies on devices 1..n-1 (index d-1), and the value itself, weakly.
type replicas struct {
	of  weak.Pointer[tensors.Tensor]
	per []*tensors.Tensor
}

// New makes a mesh of the backend's first n devices; n must be at least 2 (one device needs no
// mesh) and at most the backend's device count.
func New(b backends.Backend, n int) (*Mesh, error) {
	if n < 2 {
		return nil, fmt.Errorf("mesh: %d devices: a mesh has at least 2 (one device runs without one)", n)
	}
	if v := b.NumDevices(); n > v {
		return nil, fmt.Errorf("mesh: %d devices asked for, the backend has %d", n, v)
	}
	dm, err := distributed.NewDeviceMesh([]int{n}, []string{Axis})
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	batch, err := distributed.BuildSpec(dm).S(Axis).Done()
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	return &Mesh{n: n, backend: b, dm: dm, replicated: distributed.NewReplicatedShardingSpec(dm), batch: batch,
		copies: map[weak.Pointer[tensors.Tensor]]*replicas{}, staged: map[weak.Pointer[tensors.Tensor]][]*tensors.Tensor{}, ReplicaUploads: make([]int, n), ScalarUploads: make([]int, n), ShardUploads: make([]int, n)}, nil
}

// N is the device count.
func (m *Mesh) N() int { return m.n }

// Prepare turns g (new, nothing built yet) into a program over the mesh.
func (m *Mesh) Prepare(g *graph.Graph) error { return g.SetAutoSharding(m.dm) }

// Spec is the sharding of an input of g: the batch split on its leading axis, else replicated;
// nil when g is not a mesh program.
func Spec(g *graph.Graph, batch bool) *distributed.ShardingSpec {
	ms := g.DeviceMeshes()
	if g.DistributedStrategy() != distributed.AutoSharding || len(ms) != 1 {
		return nil
	}
	if batch {
		s, err := distributed.BuildSpec(ms[0]).S(Axis).Done()
		if err != nil {
			panic(err)
		}
		return s
	}
	return distributed.NewReplicatedShardingSpec(ms[0])
}

// Parameter is graph.Parameter with the input's mesh sharding (see Spec).
func Parameter(g *graph.Graph, name string, shape shapes.Shape, batch bool) *graph.Node {
	return graph.ShardedParameter(g, name, shape, Spec(g, batch))
}

// Compile compiles g with every output replicated: the partitioner all-reduces what the shards
// sum into and all-gathers per-row outputs, so each device ends with the whole value.
func (m *Mesh) Compile(g *graph.Graph, outs []*graph.Node) {
	specs := make([]*distributed.ShardingSpec, len(outs))
	for i := range specs {
		specs[i] = m.replicated
	}
	g.CompileWithSharding(outs, specs)
}

// Input is one program input as the caller holds it: its device-0 (or host) tensor, whether the
// run may consume its buffers, whether it is the batch (split on the leading axis), and whether
// it is made for this one call (its copies are freed after the run).
type Input struct {
	T      *tensors.Tensor
	Donate bool
	Batch  bool
	Temp   bool
}

// Run executes g (compiled by Compile) on the inputs: device-major buffers in, the device-0 copy
// of each output out, its other copies kept for the next call (scalars' are freed at once: the
// caller reads them on the host). Device-0 buffers of replicated inputs come from the tensors
// themselves (the caller uploads and counts those).
func (m *Mesh) Run(g *graph.Graph, in []Input) (outs []*tensors.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("running a program over %d devices: %v", m.n, r)
		}
	}()
	m.sweep()
	k := len(in)
	bufs, donate := make([]backends.Buffer, k*m.n), make([]bool, k*m.n)
	var shards []*tensors.Tensor // freed after the run
	defer func() {
		for _, s := range shards {
			_ = s.FinalizeAll()
		}
	}()
	for i, a := range in {
		if a.Batch {
			ss := m.takeStaged(a.T)
			if ss == nil {
				if ss, err = m.split(a.T); err != nil {
					return nil, fmt.Errorf("input %d: %w", i, err)
				}
			}
			shards = append(shards, ss...)
			for d, s := range ss {
				m.ShardUploads[d]++
				if bufs[d*k+i], err = s.DonateBuffer(m.backend, backends.DeviceNum(d)); err != nil {
					return nil, err
				}
				donate[d*k+i] = true
			}
			continue
		}
		if err := m.replicatedArgs(a, i, k, bufs, donate); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	all := g.RunWithBuffers(bufs, donate, 0)
	for _, a := range in {
		if a.Temp || a.Donate {
			m.drop(a.T)
		}
	}
	nOut := len(all) / m.n
	outs = all[:nOut]
	for i, o := range outs {
		per := make([]*tensors.Tensor, m.n-1)
		for d := 1; d < m.n; d++ {
			per[d-1] = all[d*nOut+i]
		}
		if o.Rank() == 0 {
			for _, t := range per {
				_ = t.FinalizeAll()
			}
			continue
		}
		wp := weak.Make(o)
		m.copies[wp] = &replicas{of: wp, per: per}
	}
	return outs, nil
}

// replicatedArgs fills input i's buffer on every device: its own on device 0, its copies on the
// others (placed now, and counted, when it has none).
func (m *Mesh) replicatedArgs(a Input, i, k int, bufs []backends.Buffer, donate []bool) (err error) {
	per, err := m.replicasOf(a.T)
	if err != nil {
		return err
	}
	for d := 0; d < m.n; d++ {
		t := a.T
		if d > 0 {
			t = per[d-1]
		}
		if a.Donate {
			bufs[d*k+i], err = t.DonateBuffer(m.backend, backends.DeviceNum(d))
		} else {
			bufs[d*k+i], err = t.Buffer(m.backend, backends.DeviceNum(d))
		}
		if err != nil {
			return err
		}
		donate[d*k+i] = a.Donate
	}
	return nil
}

// replicasOf returns t's copies on devices 1..n-1, placing them from t's value when t has none.
func (m *Mesh) replicasOf(t *tensors.Tensor) ([]*tensors.Tensor, error) {
	wp := weak.Make(t)
	if r, ok := m.copies[wp]; ok {
		return r.per, nil
	}
	per := make([]*tensors.Tensor, m.n-1)
	for d := 1; d < m.n; d++ {
		c, err := m.place(t, d)
		if err != nil {
			for _, p := range per[:d-1] {
				_ = p.FinalizeAll()
			}
			return nil, err
		}
		per[d-1] = c
		if t.Rank() == 0 {
			m.ScalarUploads[d]++
		} else {
			m.ReplicaUploads[d]++
		}
	}
	m.copies[wp] = &replicas{of: wp, per: per}
	return per, nil
}

// place copies t's value into a new tensor on device d (never a shared host buffer: the copy
// may be donated).
func (m *Mesh) place(t *tensors.Tensor, d int) (*tensors.Tensor, error) {
	var buf backends.Buffer
	var terr error
	err := t.ConstFlatData(func(flat any) {
		buf, terr = m.backend.BufferFromFlatData(backends.DeviceNum(d), flat, t.Shape())
	})
	if err == nil {
		err = terr
	}
	if err != nil {
		return nil, fmt.Errorf("placing %s on device %d: %w", t.Shape(), d, err)
	}
	return tensors.FromBuffer(m.backend, buf)
}

// split cuts the batch t into n shards of equal rows, shard d on device d.
func (m *Mesh) split(t *tensors.Tensor) ([]*tensors.Tensor, error) {
	dims := t.Shape().Dimensions
	if len(dims) == 0 || dims[0]%m.n != 0 {
		return nil, fmt.Errorf("batch of shape %v does not split over %d devices: its leading axis must be a multiple of %d", dims, m.n, m.n)
	}
	rowDims := append([]int{dims[0] / m.n}, dims[1:]...)
	shape := shapes.Make(t.DType(), rowDims...)
	out := make([]*tensors.Tensor, 0, m.n)
	var terr error
	err := t.ConstBytes(func(b []byte) {
		step := len(b) / m.n
		for d := 0; d < m.n && terr == nil; d++ {
			s := tensors.FromShape(shape)
			if terr = s.MutableBytes(func(dst []byte) { copy(dst, b[d*step:(d+1)*step]) }); terr != nil {
				break
			}
			if terr = s.MaterializeOnDevice(m.backend, false, backends.DeviceNum(d)); terr == nil {
				out = append(out, s)
			}
		}
	})
	if err == nil {
		err = terr
	}
	if err != nil {
		for _, s := range out {
			_ = s.FinalizeAll()
		}
		return nil, fmt.Errorf("splitting the batch over %d devices: %w", m.n, err)
	}
	return out, nil
}

// drop frees t's copies (t was donated or was made for one call).
func (m *Mesh) drop(t *tensors.Tensor) {
	wp := weak.Make(t)
	if r, ok := m.copies[wp]; ok {
		for _, c := range r.per {
			_ = c.FinalizeAll()
		}
		delete(m.copies, wp)
	}
}

// Stage splits the batch field t onto the devices ahead of the run that takes it, so that the
// transfer overlaps the step before (it is safe to call from another goroutine, e.g. a prefetch
// transfer). Run then uses these shards instead of splitting t; shards of a t dropped unrun are
// freed by a later Run.
func (m *Mesh) Stage(t *tensors.Tensor) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("staging a batch over %d devices: %v", m.n, r)
		}
	}()
	ss, err := m.split(t)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	wp := weak.Make(t)
	freeAll(m.staged[wp]) // staged again before it ran (the same tensor twice): the new shards hold the same rows
	m.staged[wp] = ss
	return nil
}

// takeStaged removes and returns t's staged shards; nil when none.
func (m *Mesh) takeStaged(t *tensors.Tensor) []*tensors.Tensor {
	m.mu.Lock()
	defer m.mu.Unlock()
	wp := weak.Make(t)
	ss := m.staged[wp]
	delete(m.staged, wp)
	return ss
}

func freeAll(ts []*tensors.Tensor) {
	for _, t := range ts {
		_ = t.FinalizeAll()
	}
}

// sweep frees the copies of values the caller no longer holds (collected or finalized), and the
// staged shards of batches dropped unrun.
func (m *Mesh) sweep() {
	m.mu.Lock()
	for wp, ss := range m.staged {
		if t := wp.Value(); t == nil || !t.Ok() {
			freeAll(ss)
			delete(m.staged, wp)
		}
	}
	m.mu.Unlock()
	for wp, r := range m.copies {
		if t := r.of.Value(); t == nil || !t.Ok() {
			for _, c := range r.per {
				_ = c.FinalizeAll()
			}
			delete(m.copies, wp)
		}
	}
}

// Copies is how many values have copies on the other devices now (tests).
func (m *Mesh) Copies() int { return len(m.copies) }
