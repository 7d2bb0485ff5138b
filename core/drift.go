package core

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/markers"
)

// Config drift: New resolves the experiment once (the knobs, the data, the model, the Device
// values on the device, the GraphConst key of the programs), so an experiment field assigned
// after New does not reach the run by itself. Each verb (Train, Evaluate/Validate, Predict,
// PredictAll, Export) compares the fields with what New left and says so, per kind, by what is
// safe:
//
//   - GraphConst: refused. The field bakes into the programs and the parameters' shapes, and a
//     program compiled from now on would be traced with the new value under the key and the
//     parameters of the old one: a stale or mismatched program. Nothing can run correctly, so the
//     verb errors until the field is set back or a new Nitro is built.
//   - Host: warned once per new value. A Host field never reaches a program (traced code that
//     reads one is refused), so the run stays self-consistent with the value New used: only the
//     user's intent is lost, and the warning restores it. A Host field may also be state that the
//     experiment's own hooks keep (a FinalizeMetrics that stashes a result for a monitor), so
//     what a verb's hooks write is adopted when the verb returns: only an assignment made between
//     verbs, by the caller, is drift.
//   - Device: warned once per new value. The programs read the device copy New (or SetDevice, or a
//     schedule) uploaded, a valid input of the right dtype and shape, so the run is consistent;
//     the write only bypassed SetDevice, which is the way to change it.

// fieldSnap is one experiment field as New left it (Device: as the device copy was last written).
type fieldSnap struct {
	name  string
	kind  markers.Kind
	index int
	fp    string          // fingerprint of the value (fingerprintValue)
	text  string          // the value as a message shows it
	dev   *tensors.Tensor // Device: the device copy the value was uploaded as
}

// driftState is the snapshot and the warnings already given.
type driftState struct {
	fields []fieldSnap
	warned map[string]string // field name -> fingerprint of the value already warned about
}

// snapshotFields records every field's value at the end of New (after Derive wrote its values).
func (n *Nitro) snapshotFields() error {
	fields, err := markers.ConfigMetadata(n.e)
	if err != nil {
		return err
	}
	n.drift = driftState{warned: map[string]string{}}
	for _, f := range fields {
		s := fieldSnap{name: f.Name, kind: f.Kind, index: f.Index}
		n.readField(&s)
		n.drift.fields = append(n.drift.fields, s)
	}
	return nil
}

// readField fills s's value from the experiment now.
func (n *Nitro) readField(s *fieldSnap) {
	v := n.fieldValue(*s)
	s.fp, s.text = fingerprintValue(v), describeValue(v)
	if s.kind == markers.KindDevice {
		s.dev = n.dev[s.name]
	}
}

// fieldValue is the field's value: a Device field's host value, else the field itself.
func (n *Nitro) fieldValue(s fieldSnap) reflect.Value {
	if s.kind == markers.KindDevice {
		if v, err := markers.DeviceValueOf(n.e, s.name); err == nil {
			return reflect.ValueOf(v)
		}
	}
	return reflect.ValueOf(n.e).Elem().Field(s.index)
}

// checkDrift is the verb's comparison of the experiment with the snapshot: an error for a
// changed GraphConst field, a warning (once per field and value) for a changed Host or Device one.
func (n *Nitro) checkDrift(verb string) error {
	var refused []string
	for i := range n.drift.fields {
		s := &n.drift.fields[i]
		if s.kind == markers.KindDevice && n.dev[s.name] != s.dev {
			n.readField(s) // SetDevice or a schedule wrote the field and its device copy together
			continue
		}
		v := n.fieldValue(*s)
		fp := fingerprintValue(v)
		if fp == s.fp {
			delete(n.drift.warned, s.name) // set back: a later change is news again
			continue
		}
		now := describeValue(v)
		switch s.kind {
		case markers.KindGraphConst:
			refused = append(refused, fmt.Sprintf("%s (%s at New, now %s)", s.name, s.text, now))
		case markers.KindDevice:
			if n.drift.warned[s.name] == fp {
				continue
			}
			n.drift.warned[s.name] = fp
			n.warn(fmt.Sprintf("%s: Device field %s of %s was assigned after core.New (%s on the device, the field now %s); the programs read the device copy, so %s is what runs: write it with n.SetDevice(%q, value), which uploads it and reuses every program",
				verb, s.name, n.typeName, s.text, now, s.text, s.name))
		default:
			if n.drift.warned[s.name] == fp {
				continue
			}
			n.drift.warned[s.name] = fp
			n.warn(fmt.Sprintf("%s: Host field %s of %s was assigned after core.New (was %s, now %s); %s",
				verb, s.name, n.typeName, s.text, now, n.frozenUse(s.name, s.text, now)))
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s refused: GraphConst field %s of %s was assigned after core.New: GraphConst fields are baked into this Nitro's programs and parameter shapes at New, so running now would mix a program of the new value with the key and parameters of the old; set it before core.New (a new Nitro: the compile cache keeps the programs of both values), or set it back",
			verb, strings.Join(refused, ", "), n.typeName)
	}
	return nil
}

// adoptHostWrites takes in the Host fields as a verb leaves them (see the kinds above); run at
// the end of every entry point.
func (n *Nitro) adoptHostWrites() {
	defer func() { _ = recover() }() // runs after the entry point's own recover: nothing may escape
	for i := range n.drift.fields {
		if s := &n.drift.fields[i]; s.kind == markers.KindHost {
			n.readField(s)
		}
	}
}

// frozenUse says what the frozen value of a Host field still drives, and the fix.
func (n *Nitro) frozenUse(name, was, now string) string {
	knobs := map[string]struct {
		v   fmt.Stringer
		opt string
	}{
		"MaxEpochs": {n.cfg.maxEpochs, "core.WithMaxEpochs"}, "Seed": {n.cfg.seed, "core.WithSeed"},
		"RunDir": {n.cfg.runDir, "core.WithRunDir"}, "Accum": {n.cfg.accum, "core.WithAccum"},
		"GradientClipNorm": {n.cfg.clip, "core.WithGradientClipNorm"}, "LearningRate": {n.cfg.lr, "core.WithLearningRate"},
		"Lambda": {n.cfg.lambda, ""},
	}
	if k, ok := knobs[name]; ok {
		fix := "set it before core.New"
		if k.opt != "" {
			fix += " or pass " + k.opt + " to core.New"
		}
		return fmt.Sprintf("New resolved the run's %s, which stays %s: %s", name, k.v, fix)
	}
	return fmt.Sprintf("what New built from it (the data, Derive, the model, the optimizer) keeps %s, while host hooks that read it from now on (FinalizeMetrics, CheckpointFilename, ExportProvenance) see %s: set it before core.New", was, now)
}

// describeValue is a value as a drift message shows it: a plain scalar's text, else its type.
func describeValue(v reflect.Value) string {
	if !v.IsValid() {
		return "nil"
	}
	if s, ok := valueText(v); ok {
		if v.Kind() == reflect.String {
			return fmt.Sprintf("%q", s)
		}
		return s
	}
	if (v.Kind() == reflect.Slice || v.Kind() == reflect.Array) && v.Len() <= 8 {
		if t, ok := scalarsText(v); ok {
			return t
		}
	}
	return "a " + v.Type().String() + " value"
}

// scalarsText prints a short slice or array of plain scalars.
func scalarsText(v reflect.Value) (string, bool) {
	parts := make([]string, v.Len())
	for i := range v.Len() {
		s, ok := valueText(v.Index(i))
		if !ok {
			return "", false
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, " ") + "]", true
}

// fingerprintValue hashes a value by content: scalars by their bits, slices, arrays, maps,
// structs and what pointers point to element by element. A *tensors.Tensor, a func or a channel
// is compared by identity (its contents may live on the device, and reading them back per verb
// would cost a transfer), and so is a slice or map past hashBudget bytes (a field holding a
// dataset would otherwise be hashed twice per Predict): replacing one is seen, writing into one
// in place is not.
func fingerprintValue(v reflect.Value) string {
	h := sha256.New()
	fp := fingerprinter{h: h, seen: map[uintptr]bool{}, budget: hashBudget}
	fp.walk(v, 0)
	return hex.EncodeToString(h.Sum(nil))
}

// hashBudget is how many bytes of one field's contents are hashed per verb (some 0.1 ms).
const hashBudget = 64 << 10

type fingerprinter struct {
	h      hash.Hash
	seen   map[uintptr]bool
	budget int
	buf    [8]byte
}

// identity hashes a slice's or map's address and length instead of its contents.
func (f *fingerprinter) identity(v reflect.Value) {
	f.h.Write([]byte("identity"))
	f.u64(uint64(v.Pointer()))
	f.u64(uint64(v.Len()))
}

var tensorPtrType = reflect.TypeOf((*tensors.Tensor)(nil))

func (f *fingerprinter) u64(x uint64) {
	binary.LittleEndian.PutUint64(f.buf[:], x)
	f.h.Write(f.buf[:])
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
	case reflect.Slice, reflect.Array:
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
			_ = binary.Write(f.h, binary.LittleEndian, v.Interface()) // fixed-size elements: their bytes at once
			return
		}
		for i := range v.Len() {
			f.walk(v.Index(i), depth+1)
		}
	case reflect.Map:
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
			pairs = append(pairs, kv{fingerprintValue(it.Key()), fingerprintValue(it.Value())})
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
		f.u64(uint64(len(pairs)))
		for _, p := range pairs {
			f.h.Write([]byte(p.k + p.v))
		}
	case reflect.Struct:
		f.h.Write([]byte(v.Type().String()))
		for i := range v.NumField() {
			f.walk(v.Field(i), depth+1)
		}
	case reflect.Pointer:
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
