package markers

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
)

// hashVersion is written first, so a change to the encoding changes every hash instead of
// silently colliding with hashes of the old encoding.
const hashVersion = "nitro/markers graphconst v1"

// GraphConstHash returns a content hash (hex SHA-256) of e's GraphConst fields only: the part
// of the compile key the experiment contributes. Device fields are excluded because they are
// traced inputs (hashing them would miss the cache on every new value); Host fields because
// they never reach a program. It is seeded by the type's qualified name, not a runtime type
// identity, and encodes values canonically (no addresses, maps in key order, all NaNs alike),
// so it is stable across processes. e is an E or a *E.
func GraphConstHash(e any) (string, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	writeString(h, hashVersion)
	writeString(h, tr.QualifiedName)
	for _, f := range tr.Fields {
		if f.Kind != KindGraphConst {
			continue
		}
		writeString(h, f.Name)
		writeString(h, f.Type.String())
		if err := encodeValue(h, v.Field(f.Index), f.Name); err != nil {
			return "", unhashableError(tr, f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// AssertGraphConstHashable refuses a GraphConst field whose value cannot be hashed by content:
// a pointer, func, channel or unsafe.Pointer, an interface holding one, or a struct, array,
// slice or map containing one. Such a value would key by identity: two identical experiments
// would recompile, and an in-place change would serve a program compiled for the old value.
// Slices, arrays, maps and structs of plain values are hashed by content and pass. New and
// FromPreset call it. e is an E or a *E.
func AssertGraphConstHashable(e any) error {
	tr, v, err := readStruct(e)
	if err != nil {
		return err
	}
	for _, f := range tr.Fields {
		if f.Kind != KindGraphConst {
			continue
		}
		if err := encodeValue(io.Discard, v.Field(f.Index), f.Name); err != nil {
			return unhashableError(tr, f, err)
		}
	}
	return nil
}

func unhashableError(tr *Traits, f Field, err error) error {
	return fmt.Errorf("markers: GraphConst field %s of %s (type %s) cannot be hashed by content: %v; "+
		"the compile key would follow identity, not value, so identical experiments would recompile and an "+
		"in-place change would reuse a stale program. Store the value itself, flatten it into GraphConst "+
		"fields of plain values, or leave the field unmarked (Host)", f.Name, tr.Name, f.Type, err)
}

// GraphConstValues returns (name, printed value) for each GraphConst field in declaration
// order: what a "why did this recompile" report compares. e is an E or a *E.
func GraphConstValues(e any) ([][2]string, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, f := range tr.Fields {
		if f.Kind == KindGraphConst {
			out = append(out, [2]string{f.Name, printValue(v.Field(f.Index))})
		}
	}
	return out, nil
}

func printValue(v reflect.Value) string {
	if v.Kind() == reflect.String {
		return strconv.Quote(v.String())
	}
	return fmt.Sprintf("%+v", v.Interface()) // fmt prints maps in key order
}

// Value tags of the canonical encoding.
const (
	tagBool byte = iota + 1
	tagInt
	tagUint
	tagFloat
	tagComplex
	tagString
	tagList
	tagMap
	tagStruct
	tagNilInterface
	tagInterface
)

func writeString(w io.Writer, s string) {
	writeUint(w, uint64(len(s)))
	_, _ = io.WriteString(w, s)
}

func writeUint(w io.Writer, u uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], u)
	_, _ = w.Write(b[:])
}

func writeFloat(w io.Writer, f float64) {
	if math.IsNaN(f) {
		f = math.NaN() // one NaN: equal configurations must hash equal
	}
	writeUint(w, math.Float64bits(f))
}

// encodeValue writes v's canonical encoding, or says why v has no content to encode.
func encodeValue(w io.Writer, v reflect.Value, path string) error {
	tag := func(b byte) { _, _ = w.Write([]byte{b}) }
	switch k := v.Kind(); {
	case k == reflect.Bool:
		tag(tagBool)
		if v.Bool() {
			tag(1)
		} else {
			tag(0)
		}
	case isInt(k):
		tag(tagInt)
		writeUint(w, uint64(v.Int()))
	case isUint(k) && k != reflect.Uintptr:
		tag(tagUint)
		writeUint(w, v.Uint())
	case k == reflect.Float32 || k == reflect.Float64:
		tag(tagFloat)
		writeFloat(w, v.Float())
	case k == reflect.Complex64 || k == reflect.Complex128:
		tag(tagComplex)
		writeFloat(w, real(v.Complex()))
		writeFloat(w, imag(v.Complex()))
	case k == reflect.String:
		tag(tagString)
		writeString(w, v.String())
	case k == reflect.Slice || k == reflect.Array:
		tag(tagList)
		writeUint(w, uint64(v.Len()))
		if v.Len() == 0 { // still check the element type: an empty []*T is refused like a full one
			return checkType(v.Type().Elem(), path+"[]")
		}
		for i := 0; i < v.Len(); i++ {
			if err := encodeValue(w, v.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case k == reflect.Map:
		if err := checkType(v.Type().Key(), path+"[key]"); err != nil {
			return err
		}
		if err := checkType(v.Type().Elem(), path+"[value]"); err != nil {
			return err
		}
		type entry struct{ k, v []byte }
		entries := make([]entry, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			var kb, vb bytes.Buffer
			if err := encodeValue(&kb, it.Key(), path+"[key]"); err != nil {
				return err
			}
			if err := encodeValue(&vb, it.Value(), path+"["+fmt.Sprint(it.Key())+"]"); err != nil {
				return err
			}
			entries = append(entries, entry{kb.Bytes(), vb.Bytes()})
		}
		sort.Slice(entries, func(i, j int) bool { // by key, then value: NaN keys may repeat
			if c := bytes.Compare(entries[i].k, entries[j].k); c != 0 {
				return c < 0
			}
			return bytes.Compare(entries[i].v, entries[j].v) < 0
		})
		tag(tagMap)
		writeUint(w, uint64(len(entries)))
		for _, e := range entries {
			_, _ = w.Write(e.k)
			_, _ = w.Write(e.v)
		}
	case k == reflect.Struct:
		tag(tagStruct)
		writeString(w, v.Type().String())
		writeUint(w, uint64(v.NumField()))
		for i := 0; i < v.NumField(); i++ {
			writeString(w, v.Type().Field(i).Name)
			if err := encodeValue(w, v.Field(i), path+"."+v.Type().Field(i).Name); err != nil {
				return err
			}
		}
	case k == reflect.Interface:
		if v.IsNil() {
			tag(tagNilInterface)
			return nil
		}
		tag(tagInterface)
		writeString(w, v.Elem().Type().String())
		return encodeValue(w, v.Elem(), path+".("+v.Elem().Type().String()+")")
	default:
		return noContent(v.Type(), path)
	}
	return nil
}

// checkType refuses, by type alone, what encodeValue would refuse for any value of it.
func checkType(t reflect.Type, path string) error {
	return checkTypeSeen(t, path, map[reflect.Type]bool{})
}

func checkTypeSeen(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Uintptr:
		return noContent(t, path)
	case reflect.Slice, reflect.Array:
		return checkTypeSeen(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if err := checkTypeSeen(t.Key(), path+"[key]", seen); err != nil {
			return err
		}
		return checkTypeSeen(t.Elem(), path+"[value]", seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := checkTypeSeen(t.Field(i).Type, path+"."+t.Field(i).Name, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func noContent(t reflect.Type, path string) error {
	switch t.Kind() {
	case reflect.Pointer:
		return fmt.Errorf("%s is a pointer (%s), which hashes by address and aliases state shared by every copy", path, t)
	case reflect.Func:
		return fmt.Errorf("%s is a func (%s), which has no content to hash; select the behaviour with a GraphConst string or int instead", path, t)
	case reflect.Chan:
		return fmt.Errorf("%s is a channel (%s), which has no content to hash", path, t)
	case reflect.UnsafePointer, reflect.Uintptr:
		return fmt.Errorf("%s is a raw address (%s), which changes every process", path, t)
	}
	return fmt.Errorf("%s has kind %s, which cannot be hashed by content", path, t.Kind())
}
