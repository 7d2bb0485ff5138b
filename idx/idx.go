package idx

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Type is an idx element type code.
type Type byte

const (
	Uint8   Type = 0x08
	Int8    Type = 0x09
	Int16   Type = 0x0B
	Int32   Type = 0x0C
	Float32 Type = 0x0D
	Float64 Type = 0x0E
)

// Size is the element's width in bytes; 0 for a code idx does not define.
func (t Type) Size() int {
	switch t {
	case Uint8, Int8:
		return 1
	case Int16:
		return 2
	case Int32, Float32:
		return 4
	case Float64:
		return 8
	}
	return 0
}

func (t Type) String() string {
	switch t {
	case Uint8:
		return "uint8"
	case Int8:
		return "int8"
	case Int16:
		return "int16"
	case Int32:
		return "int32"
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	}
	return fmt.Sprintf("type 0x%02x", byte(t))
}

// MaxBytes bounds an array's data (1 GiB): a header that claims more is refused before anything
// is allocated for it. DecodeLimit takes another bound.
const MaxBytes = 1 << 30

// Array is one idx file: its element type, dimensions and data (big-endian, as stored).
type Array struct {
	Type Type
	Dims []int
	Data []byte
}

// Len is the number of elements, the product of Dims.
func (a *Array) Len() int { return len(a.Data) / max(a.Type.Size(), 1) }

// FormatError is a malformed idx stream: the file (empty for a plain stream), the byte offset
// where the problem is and what it is.
type FormatError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *FormatError) Error() string {
	where := "idx stream"
	if e.Path != "" {
		where = "idx file " + e.Path
	}
	return fmt.Sprintf("%s: at byte %d: %s", where, e.Offset, e.Reason)
}

// Decode reads one array from r, bounded by MaxBytes.
func Decode(r io.Reader) (*Array, error) { return DecodeLimit(r, MaxBytes) }

// DecodeLimit reads one array from r whose data may be at most limit bytes.
func DecodeLimit(r io.Reader, limit int64) (*Array, error) {
	bad := func(off int64, format string, args ...any) error {
		return &FormatError{Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	var head [4]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		return nil, readErr(err, int64(n), "the 4-byte magic")
	}
	if head[0] != 0 || head[1] != 0 {
		return nil, bad(0, "bad magic % x: an idx file starts with two zero bytes (a gzipped file? ReadFile gunzips)", head)
	}
	t := Type(head[2])
	if t.Size() == 0 {
		return nil, bad(2, "unknown element type code 0x%02x (idx defines 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, 0x0d float32, 0x0e float64)", head[2])
	}
	nd := int(head[3])
	if nd == 0 {
		return nil, bad(3, "zero dimensions")
	}
	raw := make([]byte, 4*nd)
	if n, err := io.ReadFull(r, raw); err != nil {
		return nil, readErr(err, 4+int64(n), fmt.Sprintf("the %d dimensions", nd))
	}
	dims := make([]int, nd)
	total := uint64(t.Size())
	for i := range dims {
		d := binary.BigEndian.Uint32(raw[4*i:])
		dims[i] = int(d)
		if d != 0 && total > math.MaxUint64/uint64(d) {
			return nil, bad(4+4*int64(i), "dimensions %v overflow", dims[:i+1])
		}
		total *= uint64(d)
	}
	if total > uint64(limit) {
		return nil, bad(4, "dimensions %v of %s are %d bytes, over the limit of %d", dims, t, total, limit)
	}
	// Grow with what arrives, so a header that lies about a short stream costs what the stream holds.
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, int64(total)+1))
	off := 4 + 4*int64(nd)
	switch {
	case err != nil:
		return nil, readErr(err, off+n, "the data")
	case uint64(n) < total:
		return nil, bad(off+n, "truncated: dimensions %v of %s need %d data bytes, the stream holds %d", dims, t, total, n)
	case uint64(n) > total:
		return nil, bad(off+int64(total), "trailing data after the %d data bytes of dimensions %v", total, dims)
	}
	return &Array{Type: t, Dims: dims, Data: buf.Bytes()}, nil
}

// readErr turns a failed header read into a FormatError (a short stream) or the read error.
func readErr(err error, off int64, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{Offset: off, Reason: "truncated: the stream ends inside " + what}
	}
	var fe *FormatError
	if errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("idx: reading %s at byte %d: %w", what, off, err)
}

// ReadFile reads the array in path, gunzipping it when it starts with the gzip magic.
func ReadFile(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("idx: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("idx: %s: gzip: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	a, err := Decode(r)
	var fe *FormatError
	if errors.As(err, &fe) {
		fe.Path = path
		return nil, fe
	}
	if err != nil {
		return nil, fmt.Errorf("idx: %s: %w", path, err)
	}
	return a, nil
}

// Images is an image file's contents: N images of Rows×Cols uint8 pixels, row-major.
type Images struct {
	N, Rows, Cols int
	Pixels        []uint8
}

// Image returns image i's pixels (a view into Pixels).
func (im *Images) Image(i int) []uint8 {
	px := im.Rows * im.Cols
	return im.Pixels[i*px : (i+1)*px]
}

// ReadImages reads an image file: a 3-d uint8 array (images, rows, cols), MNIST's idx3-ubyte.
func ReadImages(path string) (*Images, error) {
	a, err := readShaped(path, 3, "a 3-d uint8 array (images, rows, cols)")
	if err != nil {
		return nil, err
	}
	return &Images{N: a.Dims[0], Rows: a.Dims[1], Cols: a.Dims[2], Pixels: a.Data}, nil
}

// ReadLabels reads a label file: a 1-d uint8 array, MNIST's idx1-ubyte.
func ReadLabels(path string) ([]uint8, error) {
	a, err := readShaped(path, 1, "a 1-d uint8 array (one label per image)")
	if err != nil {
		return nil, err
	}
	return a.Data, nil
}

func readShaped(path string, nd int, want string) (*Array, error) {
	a, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	if a.Type != Uint8 || len(a.Dims) != nd {
		return nil, &FormatError{Path: path, Offset: 2, Reason: fmt.Sprintf("holds %d-d %s %v, want %s", len(a.Dims), a.Type, a.Dims, want)}
	}
	return a, nil
}

// Float32s returns the elements converted to float32, whatever the stored type.
func (a *Array) Float32s() []float32 {
	n := a.Len()
	out := make([]float32, n)
	d := a.Data
	for i := range out {
		switch a.Type {
		case Uint8:
			out[i] = float32(d[i])
		case Int8:
			out[i] = float32(int8(d[i]))
		case Int16:
			out[i] = float32(int16(binary.BigEndian.Uint16(d[2*i:])))
		case Int32:
			out[i] = float32(int32(binary.BigEndian.Uint32(d[4*i:])))
		case Float32:
			out[i] = math.Float32frombits(binary.BigEndian.Uint32(d[4*i:]))
		case Float64:
			out[i] = float32(math.Float64frombits(binary.BigEndian.Uint64(d[8*i:])))
		}
	}
	return out
}

// Encode writes a as an idx stream (the inverse of Decode), for tests and for writing a data set.
func Encode(w io.Writer, a *Array) error {
	if a.Type.Size() == 0 || len(a.Dims) == 0 || len(a.Dims) > 255 {
		return fmt.Errorf("idx: cannot encode %s with %d dimensions", a.Type, len(a.Dims))
	}
	total := a.Type.Size()
	head := []byte{0, 0, byte(a.Type), byte(len(a.Dims))}
	for _, d := range a.Dims {
		if d < 0 || uint64(d) > math.MaxUint32 {
			return fmt.Errorf("idx: dimension %d does not fit a uint32", d)
		}
		head = binary.BigEndian.AppendUint32(head, uint32(d))
		total *= d
	}
	if total != len(a.Data) {
		return fmt.Errorf("idx: dimensions %v of %s need %d data bytes, the array holds %d", a.Dims, a.Type, total, len(a.Data))
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	_, err := w.Write(a.Data)
	return err
}
