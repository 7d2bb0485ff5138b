package tensorfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gopjrt/dtypes"
)

var update = flag.Bool("update", false, "rewrite testdata/plain.safetensors")

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func sample() []Tensor {
	return []Tensor{
		{Name: "dense/weights", DType: F32, Shape: []int{2, 2}, Data: f32s(1, -2, 0.5, 3)},
		{Name: "mask", DType: BOOL, Shape: []int{3}, Data: []byte{1, 0, 1}},
		{Name: "count", DType: I64, Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, 7)},
		{Name: "empty", DType: BF16, Shape: []int{0, 4}, Data: []byte{}},
	}
}

func encode(t testing.TB, ts []Tensor, meta map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, ts, meta); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The wire format is fixed: the bytes Encode writes for sample() are those in testdata.
func TestEncodeGolden(t *testing.T) {
	got := encode(t, sample(), map[string]string{"format": "test", "a": "first by key"})
	golden := filepath.Join("testdata", "plain.safetensors")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Encode differs from %s (run with -update if intended):\n got %q\nwant %q", golden, got, want)
	}
	n := binary.LittleEndian.Uint64(got)
	if (8+n)%8 != 0 {
		t.Errorf("the data starts at %d, not 8-aligned", 8+n)
	}
	if !bytes.HasPrefix(got[8:], []byte(`{"__metadata__":{"nitro.crc32c":"`)) {
		t.Errorf("the checksum is not the first metadata entry: %.60s", got[8:])
	}
}

func TestRoundTrip(t *testing.T) {
	b := encode(t, sample(), map[string]string{"format": "test"})
	ts, meta, err := Decode("f", b)
	if err != nil {
		t.Fatal(err)
	}
	if meta["format"] != "test" || meta[CRCKey] == "" {
		t.Errorf("metadata %v", meta)
	}
	want := sample()
	if len(ts) != len(want) {
		t.Fatalf("%d tensors, want %d", len(ts), len(want))
	}
	for i := range want {
		g, w := ts[i], want[i]
		if g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %d: %+v, want %+v", i, g, w)
		}
	}
	// A flipped data byte is caught by the checksum, naming it.
	b[len(b)-1] ^= 1
	var fe *FormatError
	if _, _, err := Decode("f", b); !errors.As(err, &fe) || fe.Field != MetadataKey+"."+CRCKey {
		t.Errorf("a flipped data byte: %v", err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	for name, tn := range map[string]Tensor{
		"unknown dtype": {Name: "x", DType: "F8", Shape: []int{1}, Data: []byte{0}},
		"short data":    {Name: "x", DType: F32, Shape: []int{2}, Data: make([]byte, 7)},
		"negative dim":  {Name: "x", DType: F32, Shape: []int{-1}},
		"overflow":      {Name: "x", DType: F64, Shape: []int{1 << 40, 1 << 40}},
		"reserved name": {Name: MetadataKey, DType: U8, Shape: []int{0}},
		"empty name":    {Name: "", DType: U8, Shape: []int{0}},
		"not UTF-8":     {Name: "\xff", DType: U8, Shape: []int{0}},
	} {
		if err := Encode(new(bytes.Buffer), []Tensor{tn}, nil); err == nil {
			t.Errorf("%s: Encode accepted it", name)
		}
	}
	dup := []Tensor{{Name: "a", DType: U8, Shape: []int{0}}, {Name: "a", DType: U8, Shape: []int{0}}}
	if err := Encode(new(bytes.Buffer), dup, nil); err == nil || !strings.Contains(err.Error(), `"a" appears twice`) {
		t.Errorf("duplicate name: %v", err)
	}
	if err := Encode(new(bytes.Buffer), nil, map[string]string{CRCKey: "0"}); err == nil || !strings.Contains(err.Error(), CRCKey) {
		t.Errorf("the checksum key in meta: %v", err)
	}
	if _, err := EncodeHeader(nil, []Meta{{"k", "a"}, {"k", "b"}}); err == nil {
		t.Error("EncodeHeader accepted a metadata key twice")
	}
}

func craft(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

const okTensor = `"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`

// hostile lists malformed files, each with the field its error must name.
var hostile = []struct {
	name, field string
	file        []byte
}{
	{"shorter than the prefix", "header length", []byte{1, 2, 3}},
	{"header length over the bound", "header length", binary.LittleEndian.AppendUint64(nil, MaxHeaderLen+1)},
	{"header length past the end", "header length", append(binary.LittleEndian.AppendUint64(nil, 64), "{}"...)},
	{"header length all ones", "header length", binary.LittleEndian.AppendUint64(nil, ^uint64(0))},
	{"not UTF-8", "header", craft("{\"\xff\":1}", nil)},
	{"not an object", "header", craft(`[]`, nil)},
	{"empty header", "header", craft(``, nil)},
	{"truncated JSON", `tensor "t"`, craft(`{"t":{"dtype":"F32"`, nil)},
	{"data after the object", "header", craft(`{}x`, nil)},
	{"tensor not an object", `tensor "t"`, craft(`{"t":[1]}`, nil)},
	{"unknown dtype", `tensor "t".dtype`, craft(`{"t":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1))},
	{"negative dim", `tensor "t".shape`, craft(`{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil)},
	{"fractional dim", `tensor "t".shape`, craft(`{"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,6]}}`, make([]byte, 6))},
	{"shape overflows", `tensor "t".shape`, craft(`{"t":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, nil)},
	{"bytes disagree with shape", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8))},
	{"end before begin", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4))},
	{"missing offsets", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[1]}}`, make([]byte, 1))},
	{"unknown tensor key", `tensor "t".extra`, craft(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`, make([]byte, 1))},
	{"duplicate tensor key", `tensor "t".shape`, craft(`{"t":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1))},
	{"hole", `tensor "b".data_offsets`, craft(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, make([]byte, 3))},
	{"overlap", `tensor "b".data_offsets`, craft(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, make([]byte, 3))},
	{"bytes after the last tensor", "data_offsets", craft(`{`+okTensor+`}`, make([]byte, 9))},
	{"file shorter than the tensors", "data_offsets", craft(`{`+okTensor+`}`, make([]byte, 7))},
	{"duplicate tensor name", `"t"`, craft(`{`+okTensor+`,`+okTensor+`}`, make([]byte, 8))},
	{"duplicate name, ranges that tile", `"t"`, craft(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, make([]byte, 2))},
	{"duplicate metadata key", MetadataKey + ".k", craft(`{"__metadata__":{"k":"a","k":"b"}}`, nil)},
	{"metadata value a number", MetadataKey + ".k", craft(`{"__metadata__":{"k":1}}`, nil)},
	{"metadata not an object", MetadataKey, craft(`{"__metadata__":"x"}`, nil)},
	{"checksum mismatch", MetadataKey + "." + CRCKey, craft(`{"__metadata__":{"nitro.crc32c":"00000000"},`+okTensor+`}`, make([]byte, 8))},
}

func TestDecodeHostile(t *testing.T) {
	for _, tc := range hostile {
		_, _, err := Decode("bad.safetensors", tc.file)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %v, want a *FormatError", tc.name, err)
			continue
		}
		if fe.File != "bad.safetensors" || !strings.Contains(fe.Field, tc.field) || !strings.Contains(err.Error(), "bad.safetensors") {
			t.Errorf("%s: error %q, want the file and a field naming %s", tc.name, err, tc.field)
		}
	}
}

// A plain safetensors file (entries out of data order, metadata null) decodes, in data order.
func TestDecodeForeign(t *testing.T) {
	hdr := `{"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"__metadata__":null,"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	ts, meta, err := Decode("f", craft(hdr, append(f32s(2.5), 7, 8)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "a" || ts[1].Name != "b" || !bytes.Equal(ts[1].Data, []byte{7, 8}) || len(meta) != 0 {
		t.Errorf("tensors %+v, metadata %v", ts, meta)
	}
}

// ReadHeader never reads past the header, so a header can be checked without the data.
func TestReadHeaderStops(t *testing.T) {
	b := encode(t, sample(), nil)
	n := binary.LittleEndian.Uint64(b)
	r := bytes.NewReader(b)
	h, err := ReadHeader("f", r, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if rest := r.Len(); uint64(rest) != uint64(len(b))-8-n || h.DataLen != uint64(rest) || h.Len != n {
		t.Errorf("after the header %d bytes remain, DataLen %d, Len %d (header %d)", rest, h.DataLen, h.Len, n)
	}
}

// One table: every dtype's width and PJRT dtype, and DTypeOf its inverse.
func TestDTypeTable(t *testing.T) {
	for d, want := range map[DType]struct {
		size int
		pjrt dtypes.DType
	}{
		BOOL: {1, dtypes.Bool}, U8: {1, dtypes.Uint8}, I8: {1, dtypes.Int8}, I16: {2, dtypes.Int16},
		U16: {2, dtypes.Uint16}, F16: {2, dtypes.Float16}, BF16: {2, dtypes.BFloat16}, I32: {4, dtypes.Int32},
		U32: {4, dtypes.Uint32}, F32: {4, dtypes.Float32}, F64: {8, dtypes.Float64}, I64: {8, dtypes.Int64}, U64: {8, dtypes.Uint64},
	} {
		if d.Size() != want.size || d.PJRT() != want.pjrt || DTypeOf(want.pjrt) != d || !d.Valid() {
			t.Errorf("%s: size %d, PJRT %s, DTypeOf %q; want %d, %s, itself", d, d.Size(), d.PJRT(), DTypeOf(want.pjrt), want.size, want.pjrt)
		}
	}
	if DType("F8").Valid() || DType("F8").PJRT() != dtypes.InvalidDType || DTypeOf(dtypes.Complex64) != "" {
		t.Error("an unknown dtype is not refused")
	}
}

// FuzzDecodeSafetensors: hostile bytes never panic; what is refused is a *FormatError naming the
// file; what is accepted is consistent and re-encodes to a file that decodes the same.
func FuzzDecodeSafetensors(f *testing.F) {
	f.Add(encode(f, sample(), map[string]string{"format": "test"}))
	f.Add(encode(f, nil, nil))
	for _, tc := range hostile {
		f.Add(tc.file)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, meta, err := Decode("fuzz", b)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != "fuzz" {
				t.Fatalf("error %v is not a *FormatError naming the file", err)
			}
			return
		}
		total := 0
		for _, tn := range ts {
			n, err := ByteSize(tn.DType, tn.Shape)
			if err != nil || int(n) != len(tn.Data) {
				t.Fatalf("tensor %q: %d bytes for %s %v", tn.Name, len(tn.Data), tn.DType, tn.Shape)
			}
			total += len(tn.Data)
		}
		if total > len(b) {
			t.Fatalf("tensors hold %d bytes, the file %d", total, len(b))
		}
		delete(meta, CRCKey)
		var out bytes.Buffer
		if err := Encode(&out, ts, meta); err != nil {
			return // e.g. a name Encode reserves; reading it was still safe
		}
		again, _, err := Decode("again", out.Bytes())
		if err != nil || len(again) != len(ts) {
			t.Fatalf("re-encoded file does not decode the same: %v", err)
		}
		for i := range ts {
			if again[i].Name != ts[i].Name || !bytes.Equal(again[i].Data, ts[i].Data) {
				t.Fatalf("tensor %d changed on re-encoding", i)
			}
		}
	})
}
