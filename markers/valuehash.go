package markers

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"reflect"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// ValueFingerprint hashes a value by content: scalars by their bits, slices, arrays, maps,
// structs and what pointers point to element by element. A *tensors.Tensor, a func or a channel
// is taken by identity (its contents may live on the device, and reading them back per
// comparison would cost a transfer), and so is a slice or map past HashBudget bytes (a field
// holding a dataset would otherwise be hashed at every comparison): replacing one is seen,
// writing into one in place is not.
func ValueFingerprint(v reflect.Value) string {
	h := sha256.New()
	fp := fingerprinter{h: h, seen: map[uintptr]bool{}, budget: HashBudget}
	fp.walk(v, 0)
	return hex.EncodeToString(h.Sum(nil))
}

// HashBudget is how many bytes of one value's contents ValueFingerprint hashes (some 0.1 ms);
// a slice or map beyond it is taken by identity.
const HashBudget = 64 << 10

type fingerprinter struct {
	h      hash.Hash
	seen   map[uintptr]bool
	budget int
	buf    [8]byte
}

var tensorPtrType = reflect.TypeOf((*tensors.Tensor)(nil))

func (f *fingerprinter) u64(x uint64) {
	binary.LittleEndian.PutUint64(f.buf[:], x)
	f.h.Write(f.buf[:])
}

// identity hashes a slice's or map's address and length instead of its contents.
func (f *fingerprinter) identity(v reflect.Value) {
	f.h.Write([]byte("identity"))
	f.u64(uint64(v.Pointer()))
	f.u64(uint64(v.Len()))
}

func (f *fingerprinter) walk(v reflect.Value, depth int) {
	if !v.IsValid() {
		f.h.Write([]byte{0})
		return
	}
	if depth > 32 {
		f.h.Write([]byte("deep"))
		return
	}
	f.h.Write([]byte{byte(v.Kind())})
	if f.scalar(v) {
		return
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		f.sequence(v, depth)
	case reflect.Map:
		f.mapping(v)
	case reflect.Struct:
		f.h.Write([]byte(v.Type().String()))
		for i := range v.NumField() {
			f.walk(v.Field(i), depth+1)
		}
	case reflect.Pointer:
		f.pointer(v, depth)
	case reflect.Interface:
		if v.IsNil() {
			f.h.Write([]byte("nil"))
			return
		}
		f.h.Write([]byte(v.Elem().Type().String()))
		f.walk(v.Elem(), depth+1)
	default: // func, chan, unsafe pointer: identity
		f.u64(uint64(v.Pointer()))
	}
}

// scalar hashes a bool, number or string by its bits and reports whether v was one.
func (f *fingerprinter) scalar(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			f.u64(1)
		} else {
			f.u64(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		f.u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		f.u64(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		f.u64(math.Float64bits(real(c)))
		f.u64(math.Float64bits(imag(c)))
	case reflect.String:
		f.u64(uint64(v.Len()))
		f.h.Write([]byte(v.String()))
	default:
		return false
	}
	return true
}

// sequence hashes a slice or array element by element (fixed-size numbers as their bytes at
// once), or a slice past the budget by identity.
func (f *fingerprinter) sequence(v reflect.Value, depth int) {
	if v.Kind() == reflect.Slice && v.IsNil() {
		f.h.Write([]byte("nil"))
		return
	}
	size := v.Len() * int(max(v.Type().Elem().Size(), 1))
	if v.Kind() == reflect.Slice && size > f.budget {
		f.identity(v)
		return
	}
	f.budget -= size
	f.u64(uint64(v.Len()))
	if fixedSize(v.Type().Elem().Kind()) && v.CanInterface() && binary.Size(v.Interface()) > 0 {
		_ = binary.Write(f.h, binary.LittleEndian, v.Interface())
		return
	}
	for i := range v.Len() {
		f.walk(v.Index(i), depth+1)
	}
}

// mapping hashes a map's pairs in an order independent of iteration, or a map past the budget
// by identity.
func (f *fingerprinter) mapping(v reflect.Value) {
	if v.IsNil() {
		f.h.Write([]byte("nil"))
		return
	}
	size := v.Len() * int(v.Type().Key().Size()+v.Type().Elem().Size())
	if size > f.budget {
		f.identity(v)
		return
	}
	f.budget -= size
	type kv struct{ k, v string }
	pairs := make([]kv, 0, v.Len())
	it := v.MapRange()
	for it.Next() {
		pairs = append(pairs, kv{ValueFingerprint(it.Key()), ValueFingerprint(it.Value())})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
	f.u64(uint64(len(pairs)))
	for _, p := range pairs {
		f.h.Write([]byte(p.k + p.v))
	}
}

// pointer hashes what a pointer points to, once per address (a cycle is hashed by address); a
// *tensors.Tensor by its address.
func (f *fingerprinter) pointer(v reflect.Value, depth int) {
	if v.IsNil() {
		f.h.Write([]byte("nil"))
		return
	}
	if v.Type() == tensorPtrType || f.seen[v.Pointer()] {
		f.u64(uint64(v.Pointer()))
		return
	}
	f.seen[v.Pointer()] = true
	f.walk(v.Elem(), depth+1)
}

// fixedSize reports whether values of kind k are plain fixed-size numbers (binary.Write's data).
func fixedSize(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64,
		reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}
