package pjrthook

/*
#include <stdlib.h>
#include "hook.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// The cross-process piece. gopjrt counts a program's devices from the options it compiled with,
// one argument list per device, and GoMLX only knows the process's own devices; so the program
// that sums across processes is compiled through gopjrt as a one-device program, and this piece
// widens its options to one replica per process, each on that process's first device, as the
// plugin's client lists them. Each process then executes it with one argument list: its own
// replica's. Only the program named XProcessModule is touched; every other compile's options
// reach the plugin as the caller gave them.

// XProcessModule is the module name that marks the cross-process all-reduce program: a program
// whose text starts "module @" + XProcessModule is widened (when the client spans processes).
const XProcessModule = "nitro_xprocess_allreduce"

// Widening is what the cross-process piece did with the last compile of the reserved program.
// Seq counts those compiles; Replicas is 0 when the options went through as given (a client of
// one process, or Err). Assignment is each replica's global device id, in process order.
type Widening struct {
	Seq        uint64
	Replicas   int
	Assignment []int64
	Err        error
}

var (
	wideMu   sync.Mutex
	lastWide Widening
)

// LastWidening reports the cross-process piece's last compile of the reserved program. The
// caller that compiles it checks here that its program was widened: the piece cannot fail a
// compile itself (a PJRT error is the plugin's to make), so on a fault it passes the options
// through as given and records why.
func LastWidening() Widening {
	wideMu.Lock()
	defer wideMu.Unlock()
	w := lastWide
	w.Assignment = slices.Clone(w.Assignment)
	return w
}

func recordWidening(replicas int, assignment []int64, err error) {
	wideMu.Lock()
	defer wideMu.Unlock()
	lastWide = Widening{Seq: lastWide.Seq + 1, Replicas: replicas, Assignment: assignment, Err: err}
}

// xprocessHead is how the reserved program's text begins.
var xprocessHead = []byte("module @" + XProcessModule + " ")

// isXProcess is whether the call compiles the reserved program; it reads only the program's
// first bytes, since every compile asks.
func (c *cgoCall) isXProcess() bool {
	p := c.args.program
	if p == nil || p.code_size < C.size_t(len(xprocessHead)) || p.format_size != 4 {
		return false
	}
	if C.GoStringN(p.format, 4) != "mlir" {
		return false
	}
	return bytes.Equal(C.GoBytes(unsafe.Pointer(p.code), C.int(len(xprocessHead))), xprocessHead)
}

// compileXProcess compiles the reserved program with its options widened over the client's
// processes. It never goes through the disk cache: its executable names other processes' devices,
// and the program is a few all-reduces that compile in milliseconds.
func (c *cgoCall) compileXProcess() unsafe.Pointer {
	start := time.Now()
	assignment, err := c.processAssignment()
	var widened []byte
	if err == nil && len(assignment) > 1 {
		widened, err = widenOptions(c.Options(), assignment)
	} else if err == nil {
		// One process: nothing to widen, but the options are still read as they would be, so a
		// single-process test proves that what its caller serializes can be widened.
		_, err = widenOptions(c.Options(), []int64{0, 1})
	}
	switch {
	case err != nil:
		recordWidening(0, nil, fmt.Errorf("pjrthook: widening %s over the client's processes: %w", XProcessModule, err))
	case widened == nil:
		recordWidening(0, nil, nil) // one process: nothing to widen
	default:
		recordWidening(len(assignment), assignment, nil)
		opts := C.CBytes(widened)
		defer C.free(opts)
		was, wasSize := c.args.compile_options, c.args.compile_options_size
		c.args.compile_options, c.args.compile_options_size = (*C.char)(opts), C.size_t(len(widened))
		defer func() { c.args.compile_options, c.args.compile_options_size = was, wasSize }()
	}
	if err := c.Compile(); err != nil {
		var pe *pjrtError
		if errors.As(err, &pe) {
			return pe.ptr
		}
		return nil
	}
	count(compiledHere, time.Since(start))
	capture.record(c)
	return nil
}

// assignmentOverride, when set, stands for the client's processes: the test that hands the real
// CPU plugin (one process, several devices) a widened program sets it.
var assignmentOverride func() []int64

// processAssignment is, per process of the client in index order, the global id of its first
// device (the lowest id it holds); nil for a client of one process. This process's entry must be
// its first addressable device, the one GoMLX calls device 0 and the engine's buffers live on.
func (c *cgoCall) processAssignment() ([]int64, error) {
	if assignmentOverride != nil {
		return assignmentOverride(), nil
	}
	capacity := 64
	for {
		ids := make([]int64, capacity)
		procs := make([]C.int, capacity)
		var n C.size_t
		var own C.int
		var first C.int64_t
		if e := C.nitro_hook_client_devices(C.int(c.index), c.args.client, (*C.int64_t)(unsafe.Pointer(&ids[0])), &procs[0],
			C.size_t(capacity), &n, &own, &first); e != nil {
			return nil, errors.New(c.message(e, true))
		}
		if int(n) > capacity {
			capacity = int(n)
			continue
		}
		p := make([]int, n)
		for i := range p {
			p[i] = int(procs[i])
		}
		return assignProcesses(ids[:n], p, int(own), int64(first))
	}
}

// assignProcesses picks each process's lowest device id; nil for one process. Every process
// index in [0, max] must hold a device, and own's pick must be its first addressable device.
func assignProcesses(ids []int64, procs []int, own int, firstAddressable int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, errors.New("the client lists no devices (PJRT_Client_Devices)")
	}
	for i, p := range procs {
		if p < 0 {
			return nil, fmt.Errorf("device %d has process index %d", ids[i], p)
		}
	}
	world := slices.Max(procs) + 1
	if world == 1 {
		return nil, nil
	}
	out := make([]int64, world)
	for i := range out {
		out[i] = -1
	}
	for i, id := range ids {
		if p := procs[i]; out[p] < 0 || id < out[p] {
			out[p] = id
		}
	}
	for p, id := range out {
		if id < 0 {
			return nil, fmt.Errorf("no device of process %d among the client's %d devices over %d processes", p, len(ids), world)
		}
	}
	if own < 0 || own >= world {
		return nil, fmt.Errorf("this client is process %d, outside the devices' %d processes", own, world)
	}
	if out[own] != firstAddressable {
		return nil, fmt.Errorf("this process's lowest device id is %d but its first addressable device is %d: the replica would not run where the engine's buffers are", out[own], firstAddressable)
	}
	return out, nil
}

// Field numbers of the compile options (CompileOptionsProto, ExecutableBuildOptionsProto and
// DeviceAssignmentProto, as gopjrt serializes them).
const (
	optBuildOptions  = 3 // CompileOptionsProto.executable_build_options
	optPortable      = 4 // CompileOptionsProto.compile_portable_executable
	buildReplicas    = 4 // ExecutableBuildOptionsProto.num_replicas
	buildPartitions  = 5
	buildAssignment  = 9
	assignReplicas   = 1 // DeviceAssignmentProto.replica_count
	assignComputes   = 2
	assignComputeDev = 3
	computeDeviceIDs = 1 // ComputationDevice.replica_device_ids
)

// widenOptions rewrites serialized compile options for one replica per entry of assignment (a
// global device id each), one partition, and not portable; every other field is kept as it was.
// Options that do not parse, or that ask for several partitions or for a number of replicas
// other than one or the assignment's, are refused: the program is compiled as one device and
// widened here only.
func widenOptions(opts []byte, assignment []int64) ([]byte, error) {
	var out, build []byte
	foundBuild := false
	err := eachField(opts, func(num protowire.Number, typ protowire.Type, field []byte) error {
		switch num {
		case optPortable:
			return nil // dropped: false is proto3's default
		case optBuildOptions:
			if typ != protowire.BytesType {
				return fmt.Errorf("executable_build_options has wire type %d, want bytes", typ)
			}
			v, n := protowire.ConsumeBytes(field[tagLen(field):])
			if n < 0 {
				return protowire.ParseError(n)
			}
			build, foundBuild = append(build, v...), true // repeated occurrences merge
			return nil
		}
		out = append(out, field...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("compile options: %w", err)
	}
	if !foundBuild {
		return nil, errors.New("compile options: no executable_build_options")
	}
	var nb []byte
	err = eachField(build, func(num protowire.Number, typ protowire.Type, field []byte) error {
		switch num {
		case buildReplicas, buildPartitions:
			if typ != protowire.VarintType {
				return fmt.Errorf("field %d has wire type %d, want varint", num, typ)
			}
			v, _ := protowire.ConsumeVarint(field[tagLen(field):])
			if v > 1 && (num == buildPartitions || v != uint64(len(assignment))) {
				return fmt.Errorf("the program was compiled for %d replicas or partitions (field %d); it must be compiled as one device", v, num)
			}
			return nil
		case buildAssignment:
			return nil
		}
		nb = append(nb, field...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("compile options' executable_build_options: %w", err)
	}
	nb = protowire.AppendTag(nb, buildReplicas, protowire.VarintType)
	nb = protowire.AppendVarint(nb, uint64(len(assignment)))
	nb = protowire.AppendTag(nb, buildPartitions, protowire.VarintType)
	nb = protowire.AppendVarint(nb, 1)
	var ids []byte
	for _, id := range assignment {
		ids = protowire.AppendVarint(ids, uint64(id))
	}
	var dev []byte
	dev = protowire.AppendTag(dev, computeDeviceIDs, protowire.BytesType)
	dev = protowire.AppendBytes(dev, ids)
	var da []byte
	da = protowire.AppendTag(da, assignReplicas, protowire.VarintType)
	da = protowire.AppendVarint(da, uint64(len(assignment)))
	da = protowire.AppendTag(da, assignComputes, protowire.VarintType)
	da = protowire.AppendVarint(da, 1)
	da = protowire.AppendTag(da, assignComputeDev, protowire.BytesType)
	da = protowire.AppendBytes(da, dev)
	nb = protowire.AppendTag(nb, buildAssignment, protowire.BytesType)
	nb = protowire.AppendBytes(nb, da)
	out = protowire.AppendTag(out, optBuildOptions, protowire.BytesType)
	return protowire.AppendBytes(out, nb), nil
}

// eachField calls fn with every top-level field of a serialized message, its tag included.
func eachField(msg []byte, fn func(num protowire.Number, typ protowire.Type, field []byte) error) error {
	for off := 0; off < len(msg); {
		num, typ, n := protowire.ConsumeField(msg[off:])
		if n < 0 {
			return fmt.Errorf("at byte %d: %w", off, protowire.ParseError(n))
		}
		if err := fn(num, typ, msg[off:off+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// tagLen is the length of the tag that starts field (already parsed by eachField).
func tagLen(field []byte) int {
	_, _, n := protowire.ConsumeTag(field)
	return n
}
