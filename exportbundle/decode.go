package exportbundle

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/gopjrt/dtypes/bfloat16"
	"github.com/x448/float16"

	"github.com/nitro-go/nitro/tensorfile"
)

// The request decoder reads a /predict body once, through a small buffer, appending each
// input's elements to its tensor as they arrive. Nothing it keeps grows with the body: an input
// holds at most the bundle's largest batch times its row, every other axis is held to its
// declared length, nesting deeper than the input's rank is refused at the first extra '[', and
// keys, numbers and strings have fixed caps. A body that breaks a bound is refused on the byte
// that breaks it, so a hostile body costs its buffer, not its size.

const (
	maxKeyBytes    = 4096 // an input name or top-level key
	maxNumberBytes = 512  // one number's text
	maxStringBytes = 16   // a string element: only "NaN", "+Inf", "Inf" and "-Inf" are values
	readBufBytes   = 32 << 10
)

// syntaxError is a body that is not the JSON it must be: a 400 "malformed body".
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// readError is a failure to read the body itself (too large, stalled, cut).
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufBytes) }}

type decoder struct {
	br  *bufio.Reader
	off int64 // bytes consumed, for the syntax errors' offsets
}

// decodeRequest reads one {"inputs": {...}} body against specs; batches (ascending, not empty) bound the batch axis.
// The error is a *syntaxError, a *readError or an *InputError naming the input.
func decodeRequest(body io.Reader, specs []TensorSpec, batches []int) (map[string]Tensor, error) {
	d, release, err := openBody(body, `{"inputs": {...}}`)
	defer release()
	if err != nil {
		return nil, err
	}
	var inputs map[string]Tensor
	seen := false
	if err := d.object(func(key string) error {
		if key != "inputs" {
			return d.syntax(fmt.Sprintf("unknown field %q (the body holds only \"inputs\")", key))
		}
		if seen {
			return d.syntax(`duplicate key "inputs"`)
		}
		seen = true
		c, err := d.peek()
		if err != nil {
			return err
		}
		if c == 'n' { // "inputs": null is the same as no inputs at all
			return d.literal("null")
		}
		if c != '{' {
			return d.syntax(`"inputs" is not an object`)
		}
		d.skip()
		inputs, err = d.inputs(specs, batches)
		return err
	}); err != nil {
		return nil, err
	}
	if _, err := d.next(); err == nil {
		return nil, d.syntax("data after the JSON object")
	} else if err != io.EOF {
		return nil, err
	}
	if inputs == nil {
		return nil, &syntaxError{`no "inputs" object`}
	}
	return inputs, nil
}

// openBody is a decoder on body, through a pooled buffer that release gives back, past the
// body's opening '{' (want is what the body must be, for the errors).
func openBody(body io.Reader, want string) (d *decoder, release func(), err error) {
	br := readers.Get().(*bufio.Reader)
	br.Reset(body)
	release = func() {
		br.Reset(nil)
		readers.Put(br)
	}
	d = &decoder{br: br}
	c, err := d.next()
	if err == io.EOF {
		return nil, release, &syntaxError{"the body is empty (it must be " + want + ")"}
	}
	if err != nil {
		return nil, release, err
	}
	if c != '{' {
		return nil, release, d.syntax("the body is not a JSON object (it must be " + want + ")")
	}
	return d, release, nil
}

// open consumes the next byte, which must be want ('[' or '{'); else the error names field.
func (d *decoder) open(field string, want byte) error {
	c, err := d.nextIn()
	if err != nil {
		return err
	}
	if c != want {
		return &fieldError{field, map[byte]string{'[': "not an array", '{': "not an object", '"': "not a string"}[want]}
	}
	return nil
}

// stringField reads a string value of at most limit bytes; field names it in errors.
func (d *decoder) stringField(field string, limit int) (string, error) {
	if err := d.open(field, '"'); err != nil {
		return "", err
	}
	return d.str(limit, field)
}

func (d *decoder) syntax(msg string) error {
	return &syntaxError{fmt.Sprintf("%s (at byte %d)", msg, d.off)}
}

// readByte is the next byte; io.EOF only at the body's end.
func (d *decoder) readByte() (byte, error) {
	c, err := d.br.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, io.EOF
		}
		return 0, &readError{err}
	}
	d.off++
	return c, nil
}

// peek is the next byte that is not whitespace, left unread; the end is a syntax error.
func (d *decoder) peek() (byte, error) {
	for {
		b, err := d.br.Peek(1)
		if err != nil {
			if err == io.EOF {
				return 0, d.syntax("unexpected end of the body")
			}
			return 0, &readError{err}
		}
		// Skip the buffered whitespace at once, not a byte a call.
		b, _ = d.br.Peek(d.br.Buffered())
		i := 0
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
		d.br.Discard(i)
		d.off += int64(i)
		if i < len(b) {
			return b[i], nil
		}
	}
}

func (d *decoder) skip() { d.br.Discard(1); d.off++ }

// next consumes the next byte that is not whitespace; io.EOF at the body's end.
func (d *decoder) next() (byte, error) {
	for {
		c, err := d.readByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, nil
	}
}

// nextIn is next where the body may not end.
func (d *decoder) nextIn() (byte, error) {
	c, err := d.next()
	if err == io.EOF {
		return 0, d.syntax("unexpected end of the body")
	}
	return c, err
}

// object reads the members of an object whose '{' is consumed, calling member for each key with
// the reader before its value; member must consume the value.
func (d *decoder) object(member func(key string) error) error {
	c, err := d.nextIn()
	if err != nil {
		return err
	}
	if c == '}' {
		return nil
	}
	for {
		if c != '"' {
			return d.syntax("expected a key string")
		}
		key, err := d.str(maxKeyBytes, "a key")
		if err != nil {
			return err
		}
		if c, err = d.nextIn(); err != nil {
			return err
		}
		if c != ':' {
			return d.syntax(fmt.Sprintf("expected ':' after the key %q", key))
		}
		if err := member(key); err != nil {
			return err
		}
		if c, err = d.nextIn(); err != nil {
			return err
		}
		switch c {
		case '}':
			return nil
		case ',':
			if c, err = d.nextIn(); err != nil {
				return err
			}
		default:
			return d.syntax("expected ',' or '}' in an object")
		}
	}
}

// str reads a string whose opening quote is consumed, of at most limit bytes as written.
func (d *decoder) str(limit int, what string) (string, error) {
	var raw []byte
	raw = append(raw, '"')
	for escaped := false; ; {
		c, err := d.readByte()
		if err == io.EOF {
			return "", d.syntax("unexpected end of the body in a string")
		}
		if err != nil {
			return "", err
		}
		raw = append(raw, c)
		if len(raw) > limit+2 {
			return "", d.syntax(fmt.Sprintf("%s of over %d bytes", what, limit))
		}
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", d.syntax(fmt.Sprintf("%s is not a valid string: %v", what, err))
			}
			return s, nil
		}
	}
}

// literal consumes the word want (true, false, null), failing on anything else.
func (d *decoder) literal(want string) error {
	for i := 0; i < len(want); i++ {
		c, err := d.readByte()
		if err == io.EOF {
			return d.syntax("unexpected end of the body")
		}
		if err != nil {
			return err
		}
		if c != want[i] {
			return d.syntax("invalid character in a literal")
		}
	}
	return nil
}

// number reads a JSON number whose first byte is the next one, into buf.
func (d *decoder) number(buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if _, err := d.br.Peek(1); err == io.EOF {
			break
		} else if err != nil {
			return nil, &readError{err}
		}
		b, _ := d.br.Peek(d.br.Buffered())
		i := 0
		for i < len(b) {
			c := b[i]
			if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
				break
			}
			i++
		}
		if len(buf)+i > maxNumberBytes {
			return nil, d.syntax(fmt.Sprintf("a number of over %d bytes", maxNumberBytes))
		}
		buf = append(buf, b[:i]...)
		d.br.Discard(i)
		d.off += int64(i)
		if i < len(b) {
			break
		}
	}
	if !validNumber(buf) {
		return nil, d.syntax(fmt.Sprintf("invalid number %q", buf))
	}
	return buf, nil
}

// validNumber is JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s []byte) bool {
	i := 0
	digits := func() bool {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// inputs reads the "inputs" object (its '{' consumed): each key an input of specs, once.
func (d *decoder) inputs(specs []TensorSpec, batches []int) (map[string]Tensor, error) {
	byName := make(map[string]int, len(specs))
	var names []string
	for i, s := range specs {
		byName[s.Name] = i
		names = append(names, s.Name)
	}
	out := make(map[string]Tensor, len(specs))
	err := d.object(func(key string) error {
		i, ok := byName[key]
		if !ok {
			return &InputError{Input: key, Msg: fmt.Sprintf("not an input of this bundle (it takes %s)", strings.Join(names, ", "))}
		}
		if _, dup := out[key]; dup {
			return &InputError{Input: key, Msg: `given twice in "inputs": each input is one key`}
		}
		t, err := d.input(specs[i], batches)
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) || errors.As(err, new(*syntaxError)) || errors.As(err, new(*readError)) {
				return err
			}
			return &InputError{Input: key, Msg: err.Error()}
		}
		out[key] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inputState is one input being read: the lengths it must have per axis (the batch axis's
// fixed by its first complete array), where the reader is, and the elements so far.
type inputState struct {
	spec    TensorSpec
	dims    []int // per axis; -1 while the batch axis is not yet known
	at      []int // the index at each depth being read
	batches []int
	short   bool // a first array was found shorter than declared
	data    []byte
	num     []byte
}

// input reads one input's nested arrays as its TensorSpec's dtype and shape.
func (d *decoder) input(spec TensorSpec, batches []int) (Tensor, error) {
	rank := len(spec.Shape)
	if len(batches) == 0 {
		return Tensor{}, errors.New("the bundle has no programs")
	}
	if spec.BatchAxis < 0 || spec.BatchAxis >= rank {
		return Tensor{}, fmt.Errorf("the bundle declares batch axis %d for a rank-%d input", spec.BatchAxis, rank)
	}
	st := &inputState{spec: spec, dims: spec.ShapeAt(-1), at: make([]int, rank), batches: batches, num: make([]byte, 0, 32)}
	if err := d.value(st, 0); err != nil {
		return Tensor{}, err
	}
	if st.short {
		want := spec.ShapeAt(st.dims[spec.BatchAxis])
		return Tensor{}, fmt.Errorf("shape %v, the bundle takes %v", st.dims, want)
	}
	return Tensor{DType: spec.DType, Shape: st.dims, Data: st.data}, nil
}

// first reports whether the reader is on the first array at depth (every index above is 0):
// there a length that differs from the declared one is the shape's fault, elsewhere raggedness.
func (st *inputState) first(depth int) bool {
	for _, i := range st.at[:depth] {
		if i != 0 {
			return false
		}
	}
	return true
}

func (st *inputState) where(depth int) string {
	return strings.ReplaceAll(fmt.Sprint(st.at[:depth]), " ", "][")
}

func (d *decoder) value(st *inputState, depth int) error {
	rank := len(st.spec.Shape)
	c, err := d.peek()
	if err != nil {
		return err
	}
	if depth == rank { // an element
		st.data, err = d.element(st.data, &st.num, st.spec.DType)
		return err
	}
	if c != '[' {
		if st.first(depth) {
			return fmt.Errorf("rank %d, the bundle takes rank %d (shape %v, batch axis %d)", depth, rank, st.spec.Shape, st.spec.BatchAxis)
		}
		return fmt.Errorf("ragged: element %s is not an array (the bundle takes rank %d)", st.where(depth), rank)
	}
	d.skip()
	if c, err = d.peek(); err != nil {
		return err
	}
	if c == ']' {
		return fmt.Errorf("an empty array at depth %d", depth)
	}
	want := st.dims[depth]
	n := 0
	for {
		st.at[depth] = n
		switch {
		case want >= 0 && n == want && st.first(depth) && depth != st.spec.BatchAxis:
			return fmt.Errorf("more than %d elements along axis %d (the bundle takes shape %v, batch axis %d)", want, depth, st.spec.Shape, st.spec.BatchAxis)
		case want >= 0 && n == want:
			return fmt.Errorf("ragged: the array at %s holds more than %d elements", st.where(depth), want)
		case want < 0 && n == st.batches[len(st.batches)-1] && st.short:
			// A shape already found wrong is the fault to name, not the batch it went on to.
			got := slices.Clone(st.dims)
			got[depth] = n
			return fmt.Errorf("shape %v and more along axis %d, the bundle takes %v (its largest batch size is %d)", got, depth, st.spec.ShapeAt(n), n)
		case want < 0 && n == st.batches[len(st.batches)-1]:
			return fmt.Errorf("batch size over %d: the bundle has programs for batch sizes %v: split the request into batches of those sizes, or export again with larger batch sizes (nitro export --batch-sizes)", n, st.batches)
		}
		if err := d.value(st, depth+1); err != nil {
			return err
		}
		n++
		c, err := d.nextIn()
		if err != nil {
			return err
		}
		if c == ']' {
			break
		}
		if c != ',' {
			return d.syntax("expected ',' or ']' in an array")
		}
	}
	switch {
	case want < 0:
		st.dims[depth] = n // the batch axis: its first array fixes it
	case n != want && st.first(depth):
		// Read on at the length found, to report the whole shape the client sent; every bound
		// still holds, since the found length is below the declared one.
		st.short, st.dims[depth] = true, n
	case n != want:
		return fmt.Errorf("ragged: the array at %s holds %d elements, the first along axis %d holds %d", st.where(depth), n, depth, want)
	}
	return nil
}

// element reads one element (its first byte next) and appends it to dst as dtype dt; num is
// the scratch buffer for a number's text.
func (d *decoder) element(dst []byte, num *[]byte, dt tensorfile.DType) ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	var v any
	switch c {
	case '[':
		v = []any{}
	case '{':
		v = map[string]any{}
	case '"':
		d.skip()
		s, err := d.str(maxStringBytes, "a string element")
		if err != nil {
			var se *syntaxError
			if errors.As(err, &se) && strings.Contains(se.msg, "of over") {
				return nil, fmt.Errorf("a string of over %d bytes is not an element (dtype %s)", maxStringBytes, dt)
			}
			return nil, err
		}
		v = s
	case 't':
		v, err = true, d.literal("true")
	case 'f':
		v, err = false, d.literal("false")
	case 'n':
		v, err = nil, d.literal("null")
	default: // a number: the common case, appended without boxing it
		if *num, err = d.number(*num); err != nil {
			return nil, err
		}
		return appendNumber(dst, string(*num), dt)
	}
	if err != nil {
		return nil, err
	}
	return appendScalar(dst, v, dt)
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, readBufBytes) }

// appendScalar appends one decoded JSON value as dtype d: a boolean for BOOL, a number, or for
// a float dtype the strings "NaN", "+Inf", "Inf" and "-Inf" (JSON has no spelling for them).
func appendScalar(dst []byte, v any, d tensorfile.DType) ([]byte, error) {
	if d == tensorfile.BOOL {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%v is not a boolean (dtype BOOL)", describe(v))
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	}
	if num, ok := v.(json.Number); ok {
		return appendNumber(dst, string(num), d)
	}
	switch d {
	case tensorfile.F16, tensorfile.BF16, tensorfile.F32, tensorfile.F64:
		if x, ok := v.(string); ok {
			switch x {
			case "NaN":
				return appendFloat(dst, math.NaN(), d, x)
			case "+Inf", "Inf":
				return appendFloat(dst, math.Inf(1), d, x)
			case "-Inf":
				return appendFloat(dst, math.Inf(-1), d, x)
			}
			return nil, fmt.Errorf("string %q is not a number (dtype %s)", x, d)
		}
	}
	return nil, fmt.Errorf("%v is not a number (dtype %s)", describe(v), d)
}

// appendNumber appends the JSON number num as dtype d: a float rounded to it, an integer only
// when it is one and fits.
func appendNumber(dst []byte, num string, d tensorfile.DType) ([]byte, error) {
	le := binary.LittleEndian
	switch d {
	case tensorfile.BOOL:
		return nil, fmt.Errorf("%s is not a boolean (dtype BOOL)", num)
	case tensorfile.F16, tensorfile.BF16, tensorfile.F32, tensorfile.F64:
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a %s number", num, d)
		}
		return appendFloat(dst, f, d, num)
	}
	bitSize := 8 * d.Size()
	switch d {
	case tensorfile.U8, tensorfile.U16, tensorfile.U32, tensorfile.U64:
		u, err := strconv.ParseUint(num, 10, bitSize)
		if err != nil {
			return nil, fmt.Errorf("%s is not a %d-bit unsigned integer (dtype %s)", num, bitSize, d)
		}
		switch bitSize {
		case 8:
			return append(dst, byte(u)), nil
		case 16:
			return le.AppendUint16(dst, uint16(u)), nil
		case 32:
			return le.AppendUint32(dst, uint32(u)), nil
		}
		return le.AppendUint64(dst, u), nil
	default: // I8, I16, I32, I64
		i, err := strconv.ParseInt(num, 10, bitSize)
		if err != nil {
			return nil, fmt.Errorf("%s is not a %d-bit integer (dtype %s)", num, bitSize, d)
		}
		switch bitSize {
		case 8:
			return append(dst, byte(i)), nil
		case 16:
			return le.AppendUint16(dst, uint16(i)), nil
		case 32:
			return le.AppendUint32(dst, uint32(i)), nil
		}
		return le.AppendUint64(dst, uint64(i)), nil
	}
}

// appendFloat appends f as the float dtype d, refusing a finite value that overflows it (text
// is how the client wrote it, for the message).
func appendFloat(dst []byte, f float64, d tensorfile.DType, text string) ([]byte, error) {
	le := binary.LittleEndian
	var out []byte
	switch d {
	case tensorfile.F64:
		out = le.AppendUint64(dst, math.Float64bits(f))
	case tensorfile.F32:
		out = le.AppendUint32(dst, math.Float32bits(float32(f)))
	case tensorfile.F16:
		out = le.AppendUint16(dst, float16.Fromfloat32(float32(f)).Bits())
	default:
		out = le.AppendUint16(dst, bfloat16.FromFloat32(float32(f)).Bits())
	}
	if g := float64At(d, out[len(dst):], 0); math.IsInf(g, 0) && !math.IsInf(f, 0) {
		return nil, fmt.Errorf("%s overflows dtype %s", text, d)
	}
	return out, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case string:
		return strconv.Quote(x)
	default:
		return fmt.Sprint(x)
	}
}
