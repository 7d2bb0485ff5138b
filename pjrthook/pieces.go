package pjrthook

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// Program is one program exactly as it was handed to the plugin's Compile: Format is the PJRT
// program format ("mlir" for StableHLO) and Code its bytes.
type Program struct {
	Format string
	Code   []byte
}

// The capture piece: while armed, every successful compile's program is kept, in order.
type recorder struct {
	mu    sync.Mutex
	armed bool
	progs []Program
}

var capture recorder

func (r *recorder) record(c *cgoCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed {
		format, code := c.Program()
		r.progs = append(r.progs, Program{Format: format, Code: code})
	}
}

// Arm starts recording the programs compiled through the interposer, dropping any recorded
// before; Disarm stops and drops them. Recording is process-wide: the caller serializes captures.
func Arm() {
	capture.mu.Lock()
	capture.armed, capture.progs = true, nil
	capture.mu.Unlock()
}

// Disarm stops recording and drops the records.
func Disarm() {
	capture.mu.Lock()
	capture.armed, capture.progs = false, nil
	capture.mu.Unlock()
}

// Recorded returns the programs compiled since Arm, in compile order.
func Recorded() []Program {
	capture.mu.Lock()
	defer capture.mu.Unlock()
	return append([]Program(nil), capture.progs...)
}

// The disk cache piece: one process-wide cache, or none.
var disk atomic.Pointer[diskcache.Cache]

// SetDisk makes c the disk cache every interposed compile goes through from now on; nil turns
// it off (compiles go straight to the plugin).
func SetDisk(c *diskcache.Cache) { disk.Store(c) }

// Disk returns the disk cache in use, or nil.
func Disk() *diskcache.Cache { return disk.Load() }

// Counts are the process's compiles through the interposer: Compiled by the plugin, loaded
// FromDisk, or loaded from an identical program's executable compiled earlier in a
// ShareCompiles window (Shared), and Seconds spent in them all (a load's included: what a start
// waits for).
type Counts struct {
	Compiled int64
	FromDisk int64
	Shared   int64
	Seconds  float64
}

// source is where a compile's executable came from.
type source int

const (
	compiledHere source = iota
	fromDiskCache
	fromShared
)

var compiled, fromDisk, nanos atomic.Int64

func count(from source, took time.Duration) {
	switch from {
	case fromDiskCache:
		fromDisk.Add(1)
	case compiledHere:
		compiled.Add(1)
	} // fromShared: counted by compileShared (sharedLoads)
	nanos.Add(int64(took))
}

// Stats returns the process's counts so far; a caller reports a span as the difference of two.
func Stats() Counts {
	return Counts{Compiled: compiled.Load(), FromDisk: fromDisk.Load(), Shared: sharedLoads.Load(),
		Seconds: time.Duration(nanos.Load()).Seconds()}
}
