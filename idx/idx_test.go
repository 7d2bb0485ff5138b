package idx_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/idx"
)

// header builds an idx header: type code and dimensions.
func header(t idx.Type, dims ...uint32) []byte {
	b := []byte{0, 0, byte(t), byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return b
}

func TestRoundTripEveryType(t *testing.T) {
	be := binary.BigEndian
	cases := []struct {
		t    idx.Type
		data []byte
		want []float32
	}{
		{idx.Uint8, []byte{0, 255}, []float32{0, 255}},
		{idx.Int8, []byte{0x80, 0x7f}, []float32{-128, 127}},
		{idx.Int16, be.AppendUint16(be.AppendUint16(nil, 0xfffe), 300), []float32{-2, 300}},
		{idx.Int32, be.AppendUint32(be.AppendUint32(nil, 0xffffffff), 70000), []float32{-1, 70000}},
		{idx.Float32, be.AppendUint32(be.AppendUint32(nil, math.Float32bits(1.5)), math.Float32bits(-2)), []float32{1.5, -2}},
		{idx.Float64, be.AppendUint64(be.AppendUint64(nil, math.Float64bits(0.25)), math.Float64bits(-8)), []float32{0.25, -8}},
	}
	for _, c := range cases {
		in := append(header(c.t, 2, 1), c.data...)
		a, err := idx.Decode(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", c.t, err)
		}
		if a.Type != c.t || !slices.Equal(a.Dims, []int{2, 1}) || a.Len() != 2 || !slices.Equal(a.Float32s(), c.want) {
			t.Errorf("%s: got %s %v %v, want %v", c.t, a.Type, a.Dims, a.Float32s(), c.want)
		}
		var out bytes.Buffer
		if err := idx.Encode(&out, a); err != nil || !bytes.Equal(out.Bytes(), in) {
			t.Errorf("%s: Encode gave % x (%v), want % x", c.t, out.Bytes(), err, in)
		}
	}
}

// Every malformed stream is a *FormatError saying what is wrong, never a panic.
func TestHostileInputs(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated: the stream ends inside the 4-byte magic"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0}, "bad magic 1f 8b 08 00"},
		{"type", []byte{0, 0, 0x0a, 1, 0, 0, 0, 0}, "unknown element type code 0x0a"},
		{"no dims", []byte{0, 0, 8, 0}, "zero dimensions"},
		{"short dims", []byte{0, 0, 8, 2, 0, 0, 0, 1, 0, 0}, "truncated: the stream ends inside the 2 dimensions"},
		{"short data", append(header(idx.Uint8, 2, 3), 1, 2, 3), "truncated: dimensions [2 3] of uint8 need 6 data bytes, the stream holds 3"},
		{"trailing", append(header(idx.Uint8, 2), 1, 2, 3), "trailing data after the 2 data bytes"},
		{"huge", header(idx.Float64, 1<<20, 1<<20), "over the limit of 1073741824"},
		{"overflow", header(idx.Float64, math.MaxUint32, math.MaxUint32, math.MaxUint32), "overflow"},
	}
	for _, c := range cases {
		_, err := idx.Decode(bytes.NewReader(c.in))
		var fe *idx.FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a FormatError containing %q", c.name, err, c.want)
		}
	}
}

// A header that claims a large array over a short stream costs what the stream holds, not what
// the header claims.
func TestLyingHeaderAllocatesLittle(t *testing.T) {
	in := append(header(idx.Uint8, 1000, 1000, 1000), make([]byte, 100)...) // claims 1e9 bytes, under the limit
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := idx.Decode(bytes.NewReader(in))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("got %v, want truncated", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("decoding a 100-byte stream allocated %d bytes", got)
	}
	if _, err := idx.DecodeLimit(bytes.NewReader(append(header(idx.Uint8, 8), make([]byte, 8)...)), 7); err == nil || !strings.Contains(err.Error(), "over the limit of 7") {
		t.Errorf("DecodeLimit(7) of 8 bytes: %v", err)
	}
}

func TestReadFileImagesAndLabels(t *testing.T) {
	dir := t.TempDir()
	img := append(header(idx.Uint8, 2, 2, 3), 0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15)
	lab := append(header(idx.Uint8, 2), 7, 3)
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write(img)
	z.Close()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, p := range []string{write("img.gz", gz.Bytes()), write("img", img)} {
		im, err := idx.ReadImages(p)
		if err != nil {
			t.Fatal(err)
		}
		if im.N != 2 || im.Rows != 2 || im.Cols != 3 || !slices.Equal(im.Image(1), []uint8{10, 11, 12, 13, 14, 15}) {
			t.Errorf("%s: %+v", p, im)
		}
	}
	labels, err := idx.ReadLabels(write("lab", lab))
	if err != nil || !slices.Equal(labels, []uint8{7, 3}) {
		t.Errorf("labels %v, %v", labels, err)
	}
	// A label file read as images, and a truncated gzip: errors naming the file.
	if _, err := idx.ReadImages(filepath.Join(dir, "lab")); err == nil || !strings.Contains(err.Error(), "holds 1-d uint8 [2], want a 3-d uint8 array") || !strings.Contains(err.Error(), "lab") {
		t.Errorf("labels as images: %v", err)
	}
	if _, err := idx.ReadImages(write("cut.gz", gz.Bytes()[:gz.Len()-12])); err == nil || !strings.Contains(err.Error(), "cut.gz") {
		t.Errorf("truncated gzip: %v", err)
	}
	if _, err := idx.ReadFile(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzDecode: any input decodes or is refused, never a panic; what decodes encodes back to the
// same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(append(header(idx.Uint8, 2, 2), 1, 2, 3, 4))
	f.Add(append(header(idx.Float32, 1), 0, 0, 0x80, 0x3f))
	f.Add(header(idx.Int16, 0))
	f.Add([]byte{0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := idx.DecodeLimit(bytes.NewReader(in), 1<<16)
		if err != nil {
			var fe *idx.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("a malformed stream gave %T %v, want a *FormatError", err, err)
			}
			return
		}
		_ = a.Float32s()
		var out bytes.Buffer
		if err := idx.Encode(&out, a); err != nil || !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("decoded %v %v but encodes to % x (%v), from % x", a.Type, a.Dims, out.Bytes(), err, in)
		}
	})
}
