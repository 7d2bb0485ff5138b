package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/tensorfile"
)

var update = flag.Bool("update", false, "rewrite testdata/header.golden")

func TestHeaderGolden(t *testing.T) {
	b := encodeBytes(t, sampleRecord())
	n := binary.LittleEndian.Uint64(b)
	hdr := b[8 : 8+n]
	if (8+n)%8 != 0 {
		t.Errorf("header ends at %d, not 8-aligned", 8+n)
	}
	golden := filepath.Join("testdata", "header.golden")
	if *update {
		if err := os.WriteFile(golden, hdr, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(hdr, want) {
		t.Errorf("header differs from %s (run with -update if intended):\n got %s\nwant %s", golden, hdr, want)
	}
}

func TestRoundTrip(t *testing.T) {
	want := sampleRecord()
	path := filepath.Join(t.TempDir(), "r.safetensors")
	if err := Write(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, got, want)
	// The file is exactly what Encode writes, and a re-encoding of what was read is identical.
	onDisk, _ := os.ReadFile(path)
	if !bytes.Equal(onDisk, encodeBytes(t, want)) || !bytes.Equal(onDisk, encodeBytes(t, got)) {
		t.Error("the bytes do not round-trip")
	}
	h, err := Info(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Epoch != 6 || h.Step != 4500 || h.Preset != "mnist-tiny" || h.RunID != want.RunID ||
		h.StopReason != "early_stop" || h.Metrics["val_loss"] != want.Metrics["val_loss"] ||
		len(h.Tensors) != len(want.Tensors) || h.Tensors[0].Name != "dense/0/weights" {
		t.Errorf("Info = %+v", h)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the record", len(entries))
	}
}

func TestRoundTripMinimal(t *testing.T) {
	r := &Record{}
	b := encodeBytes(t, r)
	got, err := decode("min", bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	r.Tensors = []Tensor{}
	sameRecord(t, got, r)
}

func TestEncodeRefuses(t *testing.T) {
	for name, tn := range map[string]Tensor{
		"unknown dtype": {Name: "x", DType: "F8", Shape: []int{1}, Data: []byte{0}},
		"short data":    {Name: "x", DType: tensorfile.F32, Shape: []int{2}, Data: make([]byte, 7)},
		"negative dim":  {Name: "x", DType: tensorfile.F32, Shape: []int{-1}},
		"overflow":      {Name: "x", DType: tensorfile.F64, Shape: []int{1 << 40, 1 << 40}},
		"reserved name": {Name: "__metadata__", DType: tensorfile.U8, Shape: []int{0}},
		"empty name":    {Name: "", DType: tensorfile.U8, Shape: []int{0}},
	} {
		r := &Record{Tensors: []Tensor{tn}}
		if err := Encode(new(bytes.Buffer), r); err == nil {
			t.Errorf("%s: Encode accepted it", name)
		}
	}
	dup := &Record{Tensors: []Tensor{{Name: "a", DType: tensorfile.U8, Shape: []int{0}}, {Name: "a", DType: tensorfile.U8, Shape: []int{0}}}}
	if err := Encode(new(bytes.Buffer), dup); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("duplicate name: %v", err)
	}
	// Write refuses before creating anything.
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "x.safetensors"), dup); err == nil {
		t.Error("Write accepted a duplicate name")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused Write left %d files", len(ents))
	}
}

const okTensor = `"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`

// hostile lists malformed files, each with the field its error must name.
var hostile = []struct {
	name, field string
	file        []byte
}{
	{"shorter than the prefix", "header length", []byte{1, 2, 3}},
	{"header length over the bound", "header length", binary.LittleEndian.AppendUint64(nil, 100_000_001)},
	{"header length past the end", "header length", append(binary.LittleEndian.AppendUint64(nil, 64), "{}"...)},
	{"header length all ones", "header length", binary.LittleEndian.AppendUint64(nil, ^uint64(0))},
	{"not UTF-8", "header", craft("{\"\xff\":1}", nil)},
	{"not an object", "header", craft(`[]`, nil)},
	{"empty header", "header", craft(``, nil)},
	{"truncated JSON", `tensor "t"`, craft(`{"t":{"dtype":"F32"`, nil)},
	{"data after the object", "header", craft(`{}x`, nil)},
	{"second object", "header", craft(`{}{}`, nil)},
	{"tensor not an object", `tensor "t"`, craft(`{"t":[1]}`, nil)},
	{"unknown dtype", `tensor "t".dtype`, craft(`{"t":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1))},
	{"dtype not a string", `tensor "t".dtype`, craft(`{"t":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4))},
	{"negative dim", `tensor "t".shape`, craft(`{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil)},
	{"fractional dim", `tensor "t".shape`, craft(`{"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,6]}}`, make([]byte, 6))},
	{"dim as string", `tensor "t".shape`, craft(`{"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}`, make([]byte, 8))},
	{"dim past uint64", `tensor "t".shape`, craft(`{"t":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,0]}}`, nil)},
	{"shape overflows", `tensor "t".shape`, craft(`{"t":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, nil)},
	{"shape overflows int64 only", `tensor "t".shape`, craft(`{"t":{"dtype":"U8","shape":[9223372036854775807,2],"data_offsets":[0,0]}}`, nil)},
	{"bytes disagree with shape", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8))},
	{"end before begin", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4))},
	{"three offsets", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, make([]byte, 1))},
	{"negative offset", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, make([]byte, 1))},
	{"missing dtype", `tensor "t".dtype`, craft(`{"t":{"shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1))},
	{"missing offsets", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[1]}}`, make([]byte, 1))},
	{"unknown tensor key", `tensor "t".extra`, craft(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`, make([]byte, 1))},
	{"duplicate tensor key", `tensor "t".shape`, craft(`{"t":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1))},
	{"hole at the start", `tensor "t".data_offsets`, craft(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, make([]byte, 2))},
	{"hole between", `tensor "b".data_offsets`, craft(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, make([]byte, 3))},
	{"overlap", `tensor "b".data_offsets`, craft(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, make([]byte, 3))},
	{"same range twice", `tensor "b".data_offsets`, craft(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, make([]byte, 2))},
	{"bytes after the last tensor", "data_offsets", craft(`{`+okTensor+`}`, make([]byte, 9))},
	{"file shorter than the tensors", "data_offsets", craft(`{`+okTensor+`}`, make([]byte, 7))},
	{"duplicate tensor name", `"t"`, craft(`{`+okTensor+`,`+okTensor+`}`, make([]byte, 8))},
	{"duplicate __metadata__", `"__metadata__"`, craft(`{"__metadata__":{},"__metadata__":{}}`, nil)},
	{"duplicate metadata key", "__metadata__.k", craft(`{"__metadata__":{"k":"a","k":"b"}}`, nil)},
	{"metadata value a number", "__metadata__.k", craft(`{"__metadata__":{"k":1}}`, nil)},
	{"metadata value an object", "__metadata__.k", craft(`{"__metadata__":{"k":{}}}`, nil)},
	{"metadata not an object", "__metadata__", craft(`{"__metadata__":"x"}`, nil)},
	{"no metadata", "__metadata__", craft(`{}`, nil)},
	{"not a nitro file", "__metadata__.nitro.format", craft(`{"__metadata__":{"format":"pt"}}`, nil)},
	{"newer format", "__metadata__.nitro.format", craft(`{"__metadata__":{"nitro.format":"3","nitro.record":"{}"}}`, nil)},
	{"record missing", "__metadata__.nitro.record", signed(`{"__metadata__":{"nitro.format":"2"}}`, nil)},
	{"record not JSON", "__metadata__.nitro.record", signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{"}}`, nil)},
	{"record format mismatch", "__metadata__.nitro.record.format", signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{\"format\":7,`+minRecord+`}"}}`, nil)},
	{"metric not a number", "__metadata__.nitro.record", signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{\"format\":2,`+minRecord+`,\"metrics\":{\"a\":\"x\"}}"}}`, nil)},
	{"duplicate key in the record's metrics", "__metadata__.nitro.record", signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{\"format\":2,`+minRecord+`,\"metrics\":{\"a\":1,\"a\":2}}"}}`, nil)},
	{"checksum mismatch", "__metadata__.nitro.crc32c", craft(`{"__metadata__":{"nitro.crc32c":"00000000","nitro.format":"1","nitro.record":"{\"format\":1}"},`+okTensor+`}`, make([]byte, 8))},
}

func TestReadHostile(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(path)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("case %d: Read error %v, want a *FormatError", i, err)
			}
			if fe.File != path || !strings.Contains(fe.Field, tc.field) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q: want file %s and a field naming %s", err, path, tc.field)
			}
		})
	}
}

// TestInfoHeaderOnly: Info validates the header against the file's size but never reads the
// data, so a checksum mismatch passes it and a header defect does not.
func TestInfoHeaderOnly(t *testing.T) {
	b := encodeBytes(t, sampleRecord())
	b[len(b)-20] ^= 0xff // inside the data
	var readPast bool
	r := &limitedReader{b: b, limit: 8 + int(binary.LittleEndian.Uint64(b)), past: &readPast}
	h, err := decodeInfo("x", r, int64(len(b)))
	if err != nil || h.Epoch != 6 {
		t.Fatalf("Info = %+v, %v", h, err)
	}
	if readPast {
		t.Error("Info read past the header")
	}
	if _, err := decode("x", bytes.NewReader(b), int64(len(b))); err == nil || !strings.Contains(err.Error(), keyCRC) {
		t.Errorf("Read of a corrupted data byte: %v", err)
	}
	for _, tc := range hostile {
		if tc.field == "__metadata__.nitro.crc32c" {
			continue
		}
		if _, err := decodeInfo("x", bytes.NewReader(tc.file), int64(len(tc.file))); err == nil {
			t.Errorf("%s: Info accepted it", tc.name)
		}
	}
}

type limitedReader struct {
	b     []byte
	off   int
	limit int
	past  *bool
}

func (r *limitedReader) Read(p []byte) (int, error) {
	if r.off+len(p) > r.limit {
		*r.past = true
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

// TestReadForeign: a file in the plain safetensors layout with no nitro metadata (tensors in a
// different order than the header, metadata null) decodes at the tensor level.
func TestReadForeign(t *testing.T) {
	hdr := `{"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"__metadata__":null,"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	b := craft(hdr, append(f32s(2.5), 7, 8))
	_, ts, err := decodeTensors("f", bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "a" || ts[1].Name != "b" || !bytes.Equal(ts[1].Data, []byte{7, 8}) {
		t.Errorf("tensors %+v", ts)
	}
	if _, err := decode("f", bytes.NewReader(b), int64(len(b))); err == nil {
		t.Error("a file without nitro.record read as a Record")
	}
}

func FuzzRead(f *testing.F) {
	valid := encodeBytes(f, sampleRecord())
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:40])
	f.Add(encodeBytes(f, &Record{}))
	for _, tc := range hostile {
		f.Add(tc.file)
	}
	f.Add(deepRecord(9000)) // nested past the depth limit: refused by one pass, in milliseconds
	f.Add(deepRecord(200_000))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode("fuzz", bytes.NewReader(b), int64(len(b)))
		h, herr := decodeInfo("fuzz", bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != "fuzz" {
				t.Fatalf("error %v is not a *FormatError naming the file", err)
			}
			return
		}
		if herr != nil || h.Epoch != r.Epoch || len(h.Tensors) != len(r.Tensors) {
			t.Fatalf("Read accepted what Info refused: %v", herr)
		}
		// What was accepted is consistent and re-encodes to a file that reads back the same.
		var total int
		for _, tn := range r.Tensors {
			n, err := tensorfile.ByteSize(tn.DType, tn.Shape)
			if err != nil || int(n) != len(tn.Data) {
				t.Fatalf("tensor %q: %d bytes for %s %v", tn.Name, len(tn.Data), tn.DType, tn.Shape)
			}
			total += len(tn.Data)
		}
		if total > len(b) {
			t.Fatalf("tensors hold %d bytes, the file %d", total, len(b))
		}
		var out bytes.Buffer
		if err := Encode(&out, r); err != nil {
			return // e.g. a name Encode reserves; reading it was still safe
		}
		r2, err := decode("again", bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-encoded record does not read back: %v", err)
		}
		if len(r2.Tensors) != len(r.Tensors) {
			t.Fatal("re-encoded record lost tensors")
		}
		for i := range r.Tensors {
			if !bytes.Equal(r.Tensors[i].Data, r2.Tensors[i].Data) || r.Tensors[i].Name != r2.Tensors[i].Name {
				t.Fatalf("tensor %d changed on re-encoding", i)
			}
		}
	})
}
