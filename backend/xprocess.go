package backend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/gomlx/gopjrt/pjrt"

	"github.com/nitro-go/nitro/pjrthook"
)

// XProcess sums over the processes of a run whose PJRT client spans them (a CUDA client started
// under a Distribution), on the device: each sum is a small XLA program of its own, one
// all-reduce per input over one replica per process, compiled as a one-device program that the
// interposer widens over the client's processes (pjrthook's cross-process piece). Every process
// calls the same methods in the same order with inputs of the same shapes, as with MPI.
//
// It is a core.Collective (host buffers: validation sums, the agreement, the stop votes) and an
// engine.DeviceAllReducer (a step's gradients, which stay on the device: AllReduceMean).
type XProcess struct {
	be          backends.Backend
	client      *pjrt.Client
	rank, world int

	mu    sync.Mutex
	progs map[string]*pjrt.LoadedExecutable // by signature: input types and the mean or the sum
}

// NewXProcess is the sum over the world processes of r's client, this one being rank. It refuses
// a backend whose client does not span exactly those processes with this one as rank: the sums
// would then be over this process alone, and each rank would train its own model.
func NewXProcess(r *Resolved, rank, world int) (*XProcess, error) {
	if world < 2 {
		return nil, fmt.Errorf("backend: a sum over processes needs 2 or more, got %d", world)
	}
	x, err := newXProcess(r.Backend, rank, world)
	if err != nil {
		return nil, err
	}
	procs, err := x.clientProcesses()
	if err != nil {
		return nil, err
	}
	if procs != world || x.client.ProcessIndex() != rank {
		return nil, fmt.Errorf("backend %s: the client is process %d of %d by its devices, the launcher says %d of %d: it does not span the run's processes, so no gradient would cross them; start it under backend.Distribute (core does, for the CUDA plugin, from NITRO_RANK/NITRO_WORLD_SIZE and NITRO_COORDINATOR) or launch under mpirun", r.Name, x.client.ProcessIndex(), procs, rank, world)
	}
	return x, nil
}

// newXProcess takes the PJRT client from a buffer of be (GoMLX keeps it unexported).
func newXProcess(be backends.Backend, rank, world int) (*XProcess, error) {
	b, err := be.BufferFromFlatData(0, []float32{0}, shapes.Make(dtypes.Float32, 1))
	if err != nil {
		return nil, fmt.Errorf("backend: reaching the device for the cross-process sum: %w", err)
	}
	pb, ok := b.(*pjrt.Buffer)
	if !ok {
		_ = be.BufferFinalize(b)
		return nil, fmt.Errorf("backend %s is not a PJRT backend: the cross-process sum runs on an XLA client", be.Name())
	}
	client := pb.Client()
	if err := be.BufferFinalize(b); err != nil {
		return nil, err
	}
	return &XProcess{be: be, client: client, rank: rank, world: world, progs: map[string]*pjrt.LoadedExecutable{}}, nil
}

// clientProcesses is how many processes the client's devices belong to.
func (x *XProcess) clientProcesses() (int, error) {
	devs, err := x.client.AllDevices()
	if err != nil {
		return 0, fmt.Errorf("backend: listing the client's devices: %w", err)
	}
	procs := 0
	for _, d := range devs {
		desc, err := d.GetDescription()
		if err != nil {
			return 0, fmt.Errorf("backend: a device's description: %w", err)
		}
		procs = max(procs, desc.ProcessIndex()+1)
	}
	return procs, nil
}

// Rank is this process, Size the processes summed over.
func (x *XProcess) Rank() int { return x.rank }
func (x *XProcess) Size() int { return x.world }

// Via names the collective for the config report.
func (x *XProcess) Via() string {
	return "an XLA all-reduce on the device, over the PJRT client that spans the processes"
}

// xinput is one input of a sum program: its element type (StableHLO's name) and dimensions.
type xinput struct {
	dtype string
	dims  []int
}

func (in xinput) tensorType() string {
	var b strings.Builder
	b.WriteString("tensor<")
	for _, d := range in.dims {
		b.WriteString(strconv.Itoa(d))
		b.WriteByte('x')
	}
	b.WriteString(in.dtype)
	b.WriteByte('>')
	return b.String()
}

// xprocessProgram is the sum program's StableHLO text: per input, an all-reduce (add) over one
// replica group of replicas, in replica order; mean multiplies each sum by 1/replicas, rounded to
// the input's type once, as the host path does (engine's reduceStep). The module's name is the
// one the interposer widens.
func xprocessProgram(ins []xinput, replicas int, mean bool) string {
	var b strings.Builder
	group := make([]string, replicas)
	for i := range group {
		group[i] = strconv.Itoa(i)
	}
	groups := fmt.Sprintf("dense<[[%s]]> : tensor<1x%dxi64>", strings.Join(group, ", "), replicas)
	args, types, rets := make([]string, len(ins)), make([]string, len(ins)), make([]string, len(ins))
	for i, in := range ins {
		types[i] = in.tensorType()
		args[i] = fmt.Sprintf("%%a%d: %s", i, types[i])
	}
	fmt.Fprintf(&b, "module @%s {\n  func.func public @main(%s) -> (%s) {\n", pjrthook.XProcessModule,
		strings.Join(args, ", "), strings.Join(types, ", "))
	for i, in := range ins {
		scalar := "tensor<" + in.dtype + ">"
		fmt.Fprintf(&b, "    %%s%d = \"stablehlo.all_reduce\"(%%a%d) ({\n    ^bb0(%%x: %s, %%y: %s):\n", i, i, scalar, scalar)
		fmt.Fprintf(&b, "      %%z = stablehlo.add %%x, %%y : %s\n      stablehlo.return %%z : %s\n", scalar, scalar)
		fmt.Fprintf(&b, "    }) {replica_groups = %s} : (%s) -> %s\n", groups, types[i], types[i])
		rets[i] = fmt.Sprintf("%%s%d", i)
		if mean {
			fmt.Fprintf(&b, "    %%c%d = stablehlo.constant dense<%s> : %s\n", i, inverse(in.dtype, replicas), types[i])
			fmt.Fprintf(&b, "    %%m%d = stablehlo.multiply %%s%d, %%c%d : %s\n", i, i, i, types[i])
			rets[i] = fmt.Sprintf("%%m%d", i)
		}
	}
	fmt.Fprintf(&b, "    func.return %s : %s\n  }\n}\n", strings.Join(rets, ", "), strings.Join(types, ", "))
	return b.String()
}

// inverse is 1/n as the literal of dtype that parses back to exactly that value of the type
// (shortest digits; MLIR wants a point in the mantissa).
func inverse(dtype string, n int) string {
	s := strconv.FormatFloat(1/float64(n), 'e', -1, 64)
	if dtype == "f32" {
		s = strconv.FormatFloat(float64(1/float32(n)), 'e', -1, 32)
	}
	if mant, exp, _ := strings.Cut(s, "e"); !strings.Contains(mant, ".") {
		s = mant + ".0e" + exp
	}
	return s
}

func signature(ins []xinput, mean bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mean=%t", mean)
	for _, in := range ins {
		b.WriteString(";" + in.tensorType())
	}
	return b.String()
}

// executable compiles the sum program of ins once per signature. Over several processes it
// checks that the interposer widened it to one replica per process: a program compiled for this
// process alone would "sum" its own values.
func (x *XProcess) executable(ins []xinput, mean bool) (*pjrt.LoadedExecutable, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	key := signature(ins, mean)
	if exe, ok := x.progs[key]; ok {
		return exe, nil
	}
	before := pjrthook.LastWidening()
	// One replica on one device, and not portable, so that gopjrt executes it with one argument
	// list and no device of its own choosing: the plugin then runs the replicas of the widened
	// program on this process's devices, as it runs any program spanning processes. The device id
	// here is only a placeholder: the interposer replaces the assignment with the processes'
	// first devices (gopjrt cannot name another process's device).
	exe, err := x.client.Compile().WithStableHLO([]byte(xprocessProgram(ins, x.world, mean))).WithDeviceAssignment([]int{0}).Done()
	if err != nil {
		return nil, fmt.Errorf("backend: compiling the cross-process sum (%d inputs over %d processes): %w", len(ins), x.world, err)
	}
	if x.world > 1 {
		w := pjrthook.LastWidening()
		switch {
		case w.Seq == before.Seq:
			err = errors.New("the interposer did not see its compile: the client is not under nitro's interposer")
		case w.Err != nil:
			err = w.Err
		case w.Replicas != x.world:
			err = fmt.Errorf("the interposer widened it over %d processes, the run has %d", w.Replicas, x.world)
		}
		if err != nil {
			_ = exe.Destroy()
			return nil, fmt.Errorf("backend: the cross-process sum over %d processes: %w", x.world, err)
		}
	}
	x.progs[key] = exe
	return exe, nil
}

// run executes the sum of ins (on device 0) and returns one output per input, in order.
func (x *XProcess) run(bufs []*pjrt.Buffer, ins []xinput, mean bool) ([]*pjrt.Buffer, error) {
	exe, err := x.executable(ins, mean)
	if err != nil {
		return nil, err
	}
	outs, err := exe.Execute(bufs...).DonateNone().Done()
	if err != nil {
		return nil, fmt.Errorf("backend: the cross-process sum over %d processes: %w", x.world, err)
	}
	if len(outs) != len(bufs) {
		return nil, errors.Join(fmt.Errorf("backend: the cross-process sum returned %d outputs for %d inputs", len(outs), len(bufs)), destroy(outs))
	}
	return outs, nil
}

func destroy(bufs []*pjrt.Buffer) error {
	var errs []error
	for _, b := range bufs {
		if b != nil {
			errs = append(errs, b.Destroy())
		}
	}
	return errors.Join(errs...)
}

// sumHost sums a host vector over the processes in place, through device 0.
func sumHost[T float32 | float64](x *XProcess, buf []T, dtype string) error {
	if len(buf) == 0 {
		return nil
	}
	in, err := x.client.BufferFromHost().FromFlatDataWithDimensions(buf, []int{len(buf)}).ToDeviceNum(0).Done()
	if err != nil {
		return fmt.Errorf("backend: uploading %d values for the cross-process sum: %w", len(buf), err)
	}
	outs, err := x.run([]*pjrt.Buffer{in}, []xinput{{dtype, []int{len(buf)}}}, false)
	err = errors.Join(err, in.Destroy())
	if err != nil {
		return errors.Join(err, destroy(outs))
	}
	err = x.be.BufferToFlatData(outs[0], buf)
	return errors.Join(err, destroy(outs))
}

// AllReduceSum sums buf over the processes in place.
func (x *XProcess) AllReduceSum(buf []float32) error { return sumHost(x, buf, "f32") }

// AllReduceSum64 sums buf over the processes in place.
func (x *XProcess) AllReduceSum64(buf []float64) error { return sumHost(x, buf, "f64") }

// Broadcast gives every process root's buf: a sum to which only root adds its bytes (each a
// float32, so exact).
func (x *XProcess) Broadcast(buf []byte, root int) error {
	if root < 0 || root >= x.world {
		return fmt.Errorf("backend: broadcast from rank %d of %d processes", root, x.world)
	}
	v := make([]float32, len(buf))
	if x.rank == root {
		for i, c := range buf {
			v[i] = float32(c)
		}
	}
	if err := x.AllReduceSum(v); err != nil {
		return err
	}
	for i, f := range v {
		if f < 0 || f > 255 || f != float32(math.Trunc(float64(f))) {
			return fmt.Errorf("backend: broadcast from rank %d: byte %d came back as %g: another rank added to it", root, i, f)
		}
		buf[i] = byte(f)
	}
	return nil
}

// AllReduceMean returns the mean over the processes of each float32 tensor of grads (a program
// output on device 0) and of scalars, the tensors still on device 0: the sums run on the device,
// and only the scalars cross to the host. grads are left to the caller.
func (x *XProcess) AllReduceMean(grads []*tensors.Tensor, scalars []float32) ([]*tensors.Tensor, []float32, error) {
	ins := make([]xinput, 0, len(grads)+1)
	bufs := make([]*pjrt.Buffer, 0, len(grads)+1)
	for i, t := range grads {
		s := t.Shape()
		if s.DType != dtypes.Float32 {
			return nil, nil, fmt.Errorf("backend: the cross-process mean takes float32 tensors; input %d is %s", i, s)
		}
		if s.Size() == 0 {
			continue
		}
		b, err := t.Buffer(x.be, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("backend: input %d of the cross-process mean on device 0: %w", i, err)
		}
		pb, ok := b.(*pjrt.Buffer)
		if !ok {
			return nil, nil, fmt.Errorf("backend: input %d of the cross-process mean is no PJRT buffer", i)
		}
		bufs, ins = append(bufs, pb), append(ins, xinput{"f32", s.Dimensions})
	}
	var sb *pjrt.Buffer
	if len(scalars) > 0 {
		var err error
		if sb, err = x.client.BufferFromHost().FromFlatDataWithDimensions(scalars, []int{len(scalars)}).ToDeviceNum(0).Done(); err != nil {
			return nil, nil, fmt.Errorf("backend: uploading the step's %d scalars: %w", len(scalars), err)
		}
		bufs, ins = append(bufs, sb), append(ins, xinput{"f32", []int{len(scalars)}})
	}
	if len(bufs) == 0 {
		return emptyLike(grads), nil, nil
	}
	outs, err := x.run(bufs, ins, true)
	if sb != nil {
		err = errors.Join(err, sb.Destroy())
	}
	if err != nil {
		return nil, nil, errors.Join(err, destroy(outs))
	}
	var means []float32
	if sb != nil {
		means = make([]float32, len(scalars))
		last := outs[len(outs)-1]
		outs = outs[:len(outs)-1]
		if err := errors.Join(x.be.BufferToFlatData(last, means), last.Destroy()); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("backend: reading the step's scalars back: %w", err), destroy(outs))
		}
	}
	res, k := emptyLike(grads), 0
	for i, t := range grads {
		if t.Shape().Size() == 0 {
			continue
		}
		if res[i], err = tensors.FromBuffer(x.be, outs[k]); err != nil {
			return nil, nil, errors.Join(err, destroy(outs[k:]))
		}
		k++
	}
	return res, means, nil
}

// emptyLike is a tensor of each of grads' shapes, holding nothing yet: the empty ones stay so.
func emptyLike(grads []*tensors.Tensor) []*tensors.Tensor {
	out := make([]*tensors.Tensor, len(grads))
	for i, t := range grads {
		if t.Shape().Size() == 0 {
			out[i] = tensors.FromShape(t.Shape())
		}
	}
	return out
}
