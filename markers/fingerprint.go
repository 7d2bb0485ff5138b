package markers

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// NewTraceGraph returns a graph built on a wrapper of b that records the bytes of every constant
// the graph creates. GoMLX keeps a constant's values in the graph only below
// graph.MinConstValueSizeToKeep elements, so without the record a Host array baked into a program
// would be seen by its shape alone and a non-zero [64]float32 would pass for zeros. Build the
// graphs handed to Fingerprint (and so to CheckHostIndependent) with it. The wrapper forwards
// everything else to b; it is meant for tracing, one graph each, and is never finalized itself.
func NewTraceGraph(b backends.Backend, name string) *graph.Graph {
	return graph.NewGraph(&traceBackend{Backend: b}, name)
}

// traceBackend hands out builders that digest every Constant they create, in creation order.
type traceBackend struct {
	backends.Backend
	mu     sync.Mutex
	consts []string
}

func (t *traceBackend) Builder(name string) backends.Builder {
	return &traceBuilder{Builder: t.Backend.Builder(name), owner: t}
}

// Finalize is a no-op: the wrapped backend belongs to the caller, and a traced graph must not
// finalize it on the way out.
func (t *traceBackend) Finalize() {}

type traceBuilder struct {
	backends.Builder
	owner *traceBackend
}

func (b *traceBuilder) Constant(flat any, dims ...int) (backends.Op, error) {
	d := digestFlat(flat, dims)
	b.owner.mu.Lock()
	b.owner.consts = append(b.owner.consts, d)
	b.owner.mu.Unlock()
	return b.Builder.Constant(flat, dims...)
}

// digestFlat hashes a constant's element type, dimensions and raw bytes: equal digests mean
// the same constant, bit for bit (a NaN payload or a -0 included).
func digestFlat(flat any, dims []int) string {
	h := sha256.New()
	v := reflect.ValueOf(flat)
	if v.Kind() != reflect.Slice {
		// not a flat slice: the backend will refuse it; digest its printed form so the
		// fingerprint still differs with the value
		fmt.Fprintf(h, "%T %v", flat, flat)
	} else {
		fmt.Fprintf(h, "%s %v ", v.Type().Elem(), dims)
		n := v.Len() * int(v.Type().Elem().Size())
		if n > 0 {
			_, _ = h.Write(unsafe.Slice((*byte)(v.UnsafePointer()), n))
		}
	}
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(v.Len()))
	_, _ = h.Write(l[:])
	return hex.EncodeToString(h.Sum(nil))
}

// Fingerprint is a canonical text of the graph built so far: one line per node in creation
// order with its op, static arguments, input node ids, output shapes and dtypes, then, for a
// graph from NewTraceGraph, one line per constant with a SHA-256 of its bytes. Two graphs with
// equal fingerprints compute the same function of their parameters. The graph's name is left
// out. A graph not from NewTraceGraph that holds a constant too large for GoMLX to keep its
// values is refused: its fingerprint could not tell two such constants apart.
func Fingerprint(g *graph.Graph) (string, error) {
	if g == nil {
		return "", nil
	}
	tb, traced := g.Backend().(*traceBackend)
	var b strings.Builder
	for _, n := range g.Nodes() {
		if !traced && n.Type() == graph.NodeTypeConstant && n.Shape().Size() >= graph.MinConstValueSizeToKeep {
			return "", fmt.Errorf("markers: Fingerprint of graph %q: constant #%d (%s) is too large for the graph to "+
				"keep its values, so two different values would print alike; build the graph with markers.NewTraceGraph",
				g.Name(), n.Id(), n.Shape())
		}
		line := n.String()
		if i := strings.LastIndex(line, " - mem: "); i >= 0 { // memory is derived from the shapes
			line = line[:i]
		}
		fmt.Fprintf(&b, "#%d %s\n", n.Id(), line)
	}
	if traced {
		tb.mu.Lock()
		for i, d := range tb.consts {
			fmt.Fprintf(&b, "const %d sha256:%s\n", i, d)
		}
		tb.mu.Unlock()
	}
	return b.String(), nil
}
