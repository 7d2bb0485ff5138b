package exportbundle

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gomlx/gopjrt/dtypes/bfloat16"
	"github.com/x448/float16"
)

// MaxRequestBytes bounds a /predict request body.
const MaxRequestBytes = 64 << 20

// Serve answers HTTP on addr (e.g. "127.0.0.1:8080"; port 0 picks one) with Handler(r), in a
// goroutine, and returns the server (stop it with Shutdown or Close) and the address it listens
// on. It batches nothing: each request is one Run.
func Serve(r *Runner, addr string) (*http.Server, net.Addr, error) {
	if r == nil {
		return nil, nil, errors.New("exportbundle: Serve: nil Runner")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("exportbundle: Serve: %w", err)
	}
	srv := &http.Server{Handler: Handler(r), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr(), nil
}

// Handler answers POST /predict. The body is {"inputs": {"<name>": <nested arrays>}}, each input
// batch-first as the bundle declares it (its batch axis's length is the batch size, which must be
// one the bundle has a program for and the same for every input). The answer is
// {"outputs": {"<name>": <nested arrays>}}. Numbers are JSON numbers, BOOL is true/false, and a
// non-finite float is the string "NaN", "+Inf" or "-Inf" (accepted on input too). A malformed
// body, a missing or unknown input, a wrong shape or a wrong dtype is a 400 whose
// {"error": "..."} names the input; a failure to execute is a 500.
func Handler(r *Runner) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/predict", func(w http.ResponseWriter, req *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				writeError(w, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", p))
			}
		}()
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		status, body := predict(r, http.MaxBytesReader(w, req.Body, MaxRequestBytes))
		if status != http.StatusOK {
			writeError(w, status, string(body))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	return mux
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// predict returns 200 and the response body, or a status and an error message.
func predict(r *Runner, body io.Reader) (int, []byte) {
	var req struct {
		Inputs map[string]json.RawMessage `json:"inputs"`
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, []byte(fmt.Sprintf("request body over %d bytes", tooBig.Limit))
		}
		return http.StatusBadRequest, []byte("malformed body: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return http.StatusBadRequest, []byte("malformed body: data after the JSON object")
	}
	if req.Inputs == nil {
		return http.StatusBadRequest, []byte(`malformed body: no "inputs" object`)
	}
	specs := r.Inputs()
	known := map[string]bool{}
	for _, s := range specs {
		known[s.Name] = true
	}
	for name := range req.Inputs {
		if !known[name] {
			return http.StatusBadRequest, []byte((&InputError{Input: name, Msg: "not an input of this bundle"}).Error())
		}
	}
	inputs := make(map[string]Tensor, len(specs))
	batch, batchFrom := -1, ""
	for _, s := range specs {
		raw, ok := req.Inputs[s.Name]
		if !ok {
			return http.StatusBadRequest, []byte((&InputError{Input: s.Name, Msg: "missing"}).Error())
		}
		t, err := decodeNested(raw, s)
		if err != nil {
			return http.StatusBadRequest, []byte((&InputError{Input: s.Name, Msg: err.Error()}).Error())
		}
		if n := t.Shape[s.BatchAxis]; batch == -1 {
			batch, batchFrom = n, s.Name
		} else if n != batch {
			return http.StatusBadRequest, []byte((&InputError{Input: s.Name, Msg: fmt.Sprintf(
				"batch size %d, input %q has %d", n, batchFrom, batch)}).Error())
		}
		inputs[s.Name] = t
	}
	out, err := r.Run(batch, inputs)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return http.StatusBadRequest, []byte(err.Error())
		}
		return http.StatusInternalServerError, []byte(err.Error())
	}
	var b bytes.Buffer
	b.WriteString(`{"outputs":{`)
	for i, s := range r.Outputs() {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(s.Name)
		b.Write(name)
		b.WriteByte(':')
		t := out[s.Name]
		encodeNested(&b, t, t.Shape, 0)
	}
	b.WriteString("}}\n")
	return http.StatusOK, b.Bytes()
}

// decodeNested parses one input's nested JSON arrays as spec's dtype and rank.
func decodeNested(raw json.RawMessage, spec TensorSpec) (Tensor, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Tensor{}, fmt.Errorf("malformed: %v", err)
	}
	rank := len(spec.Shape)
	shape := make([]int, 0, rank)
	for cur := v; len(shape) < rank; {
		arr, ok := cur.([]any)
		if !ok {
			return Tensor{}, fmt.Errorf("rank %d, the bundle takes rank %d (shape %v, batch axis %d)", len(shape), rank, spec.Shape, spec.BatchAxis)
		}
		if len(arr) == 0 {
			return Tensor{}, fmt.Errorf("an empty array at depth %d", len(shape))
		}
		shape = append(shape, len(arr))
		cur = arr[0]
	}
	if _, err := numElements(shape); err != nil {
		return Tensor{}, err
	}
	for i, d := range spec.Shape {
		if i != spec.BatchAxis && d != shape[i] {
			want := append([]int{}, spec.Shape...)
			want[spec.BatchAxis] = shape[spec.BatchAxis]
			return Tensor{}, fmt.Errorf("shape %v, the bundle takes %v", shape, want)
		}
	}
	t := Tensor{DType: spec.DType, Shape: shape}
	var err error
	if t.Data, err = appendNested(nil, v, shape, spec.DType); err != nil {
		return Tensor{}, err
	}
	return t, nil
}

func appendNested(dst []byte, v any, shape []int, d DType) ([]byte, error) {
	if len(shape) == 0 {
		return appendScalar(dst, v, d)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != shape[0] {
		return nil, fmt.Errorf("ragged: not an array of %d at some depth %d from the leaves", shape[0], len(shape))
	}
	var err error
	for _, e := range arr {
		if dst, err = appendNested(dst, e, shape[1:], d); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

func appendScalar(dst []byte, v any, d DType) ([]byte, error) {
	le := binary.LittleEndian
	if d == Bool {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%v is not a boolean (dtype BOOL)", describe(v))
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	}
	switch d {
	case F16, BF16, F32, F64:
		var f float64
		switch x := v.(type) {
		case json.Number:
			var err error
			if f, err = strconv.ParseFloat(string(x), 64); err != nil {
				return nil, fmt.Errorf("%s is not a %s number", x, d)
			}
		case string:
			switch x {
			case "NaN":
				f = math.NaN()
			case "+Inf", "Inf":
				f = math.Inf(1)
			case "-Inf":
				f = math.Inf(-1)
			default:
				return nil, fmt.Errorf("string %q is not a number (dtype %s)", x, d)
			}
		default:
			return nil, fmt.Errorf("%v is not a number (dtype %s)", describe(v), d)
		}
		var out []byte
		switch d {
		case F64:
			out = le.AppendUint64(dst, math.Float64bits(f))
		case F32:
			out = le.AppendUint32(dst, math.Float32bits(float32(f)))
		case F16:
			out = le.AppendUint16(dst, float16.Fromfloat32(float32(f)).Bits())
		default:
			out = le.AppendUint16(dst, bfloat16.FromFloat32(float32(f)).Bits())
		}
		if g := float64At(d, out[len(dst):], 0); math.IsInf(g, 0) && !math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v overflows dtype %s", describe(v), d)
		}
		return out, nil
	}
	num, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%v is not a number (dtype %s)", describe(v), d)
	}
	bitSize := 8 * d.Size()
	switch d {
	case U8, U16, U32, U64:
		u, err := strconv.ParseUint(string(num), 10, bitSize)
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
		i, err := strconv.ParseInt(string(num), 10, bitSize)
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

// encodeNested writes t's elements from flat offset at as nested arrays of shape.
func encodeNested(b *bytes.Buffer, t Tensor, shape []int, at int) int {
	if len(shape) == 0 {
		encodeScalar(b, t, at)
		return at + 1
	}
	b.WriteByte('[')
	for i := 0; i < shape[0]; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		at = encodeNested(b, t, shape[1:], at)
	}
	b.WriteByte(']')
	return at
}

func encodeScalar(b *bytes.Buffer, t Tensor, i int) {
	le := binary.LittleEndian
	var buf [32]byte
	switch t.DType {
	case Bool:
		if t.Data[i] != 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case I8, I16, I32, I64:
		var v int64
		switch t.DType {
		case I8:
			v = int64(int8(t.Data[i]))
		case I16:
			v = int64(int16(le.Uint16(t.Data[2*i:])))
		case I32:
			v = int64(int32(le.Uint32(t.Data[4*i:])))
		default:
			v = int64(le.Uint64(t.Data[8*i:]))
		}
		b.Write(strconv.AppendInt(buf[:0], v, 10))
	case U8, U16, U32, U64:
		var v uint64
		switch t.DType {
		case U8:
			v = uint64(t.Data[i])
		case U16:
			v = uint64(le.Uint16(t.Data[2*i:]))
		case U32:
			v = uint64(le.Uint32(t.Data[4*i:]))
		default:
			v = le.Uint64(t.Data[8*i:])
		}
		b.Write(strconv.AppendUint(buf[:0], v, 10))
	default: // floats
		f := float64At(t.DType, t.Data, i)
		switch {
		case math.IsNaN(f):
			b.WriteString(`"NaN"`)
		case math.IsInf(f, 1):
			b.WriteString(`"+Inf"`)
		case math.IsInf(f, -1):
			b.WriteString(`"-Inf"`)
		default:
			bits := 32
			if t.DType == F64 {
				bits = 64
			}
			b.Write(strconv.AppendFloat(buf[:0], f, 'g', -1, bits))
		}
	}
}
