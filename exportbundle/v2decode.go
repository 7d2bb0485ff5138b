package exportbundle

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/tensorfile"
)

// The infer request decoder reads the protocol's JSON with the /predict decoder's primitives and
// bounds: an input's data is appended as it arrives and refused past the bundle's largest batch
// of that input (or past its declared shape, once "shape" is read), nesting is held to the
// bundle's rank limit, and what is skipped (unknown parameters) is never kept. Binary tensors
// are read only after the JSON says their sizes, and a size must be exactly the one the input's
// validated shape and datatype make, so a header cannot make the server read or hold more than a
// valid request would.

// fieldError is a request refused for one field of the protocol's body: a 400 naming it.
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// maxSkipDepth bounds the nesting of a value read past (an unknown parameter).
const maxSkipDepth = 64

// inferRequest is a decoded infer request, ready to run.
type inferRequest struct {
	id      string
	hasID   bool
	batch   int
	tensors map[string]Tensor
	outputs []requestedOutput
}

type requestedOutput struct {
	name   string
	binary bool
}

// inferInput is one entry of "inputs" as it is read: its fields arrive in any order, but its
// name before its data (the data is decoded as the named input's dtype, within its bounds).
type inferInput struct {
	field      string // "inputs[i]", for errors
	spec       *TensorSpec
	shape      []int
	datatype   string
	binarySize int64 // -1: none
	data       []byte
	dims       []int // the nested data's lengths per axis; one axis for flat data
	hasData    bool
}

func (in *inferInput) f(name string) string { return in.field + "." + name }

// decodeInfer reads one infer body against r's inputs and outputs. headerLen is the
// Inference-Header-Content-Length header ("" for a JSON-only body) and contentLength the
// request's (-1 unknown).
func decodeInfer(body io.Reader, r *Runner, headerLen string, contentLength int64) (*inferRequest, error) {
	jsonPart := body
	if headerLen != "" {
		n, err := strconv.ParseInt(headerLen, 10, 64)
		if err != nil || n < 1 || n > MaxRequestBytes {
			return nil, &fieldError{inferenceHeaderLength, fmt.Sprintf("%q is not a length from 1 to %d bytes", headerLen, MaxRequestBytes)}
		}
		if contentLength >= 0 && n > contentLength {
			return nil, &fieldError{inferenceHeaderLength, fmt.Sprintf("%d bytes, more than the body's Content-Length %d", n, contentLength)}
		}
		jsonPart = io.LimitReader(body, n)
	}
	d, release, err := openBody(jsonPart, `{"inputs": [...]}`)
	defer release()
	if err != nil {
		return nil, headerHint(err, headerLen)
	}
	req := &inferRequest{}
	var inputs []*inferInput
	var outputs []requestedOutput
	seen := map[string]bool{}
	binaryOut := false
	if err := d.object(func(key string) error {
		if seen[key] {
			return d.syntax(fmt.Sprintf("duplicate key %q", key))
		}
		seen[key] = true
		switch key {
		case "id":
			req.id, err = d.stringField("id", maxKeyBytes)
			req.hasID = true
			return err
		case "model_name", "model_version": // KServe's client repeats the path's; they must agree
			v, err := d.stringField(key, maxKeyBytes)
			if err != nil {
				return err
			}
			if want := map[string]string{"model_name": r.Name(), "model_version": ModelVersion}[key]; v != want {
				return &fieldError{key, fmt.Sprintf("%q, but the request is for %q (the path's model, version %s)", v, want, ModelVersion)}
			}
			return nil
		case "parameters":
			return d.parameters("parameters", func(k string) (bool, error) {
				if k == "binary_data_output" {
					v, err := d.boolean("parameters.binary_data_output")
					binaryOut = v
					return true, err
				}
				return false, nil
			})
		case "inputs":
			inputs, err = d.inferInputs(r)
			return err
		case "outputs":
			outputs, err = d.requestedOutputs(r)
			return err
		}
		return d.syntax(fmt.Sprintf("unknown field %q (an infer request holds id, model_name, model_version, parameters, inputs, outputs)", key))
	}); err != nil {
		return nil, headerHint(err, headerLen)
	}
	if _, err := d.next(); err == nil {
		return nil, headerHint(d.syntax("data after the JSON object"), headerLen)
	} else if err != io.EOF {
		return nil, err
	}
	if headerLen != "" {
		if lr := jsonPart.(*io.LimitedReader); lr.N > 0 {
			return nil, &fieldError{inferenceHeaderLength, fmt.Sprintf("%s bytes, but the body ends %d bytes short of it", headerLen, lr.N)}
		}
	}
	if !seen["inputs"] {
		return nil, &fieldError{"inputs", "missing"}
	}
	if err := readBinary(body, inputs, headerLen); err != nil {
		return nil, err
	}
	if req.tensors, req.batch, err = assemble(r, inputs); err != nil {
		return nil, err
	}
	if !seen["outputs"] {
		for _, o := range r.Outputs() {
			outputs = append(outputs, requestedOutput{name: o.Name, binary: binaryOut})
		}
	} else {
		for i := range outputs {
			outputs[i].binary = outputs[i].binary || binaryOut
		}
	}
	req.outputs = outputs
	return req, nil
}

// headerHint adds to a syntax error in a binary request's JSON that the JSON is the header's
// length: a header that lies about it breaks the JSON.
func headerHint(err error, headerLen string) error {
	var se *syntaxError
	if headerLen == "" || !errors.As(err, &se) {
		return err
	}
	return &fieldError{inferenceHeaderLength, fmt.Sprintf("the JSON header, its first %s bytes, is malformed: %s", headerLen, se.msg)}
}

// parameters reads a parameters object (its '{' next): known(key) consumes and reports the
// values it knows; parameters that would change what the answer means and that nitro does not
// implement are refused; any other is read past.
func (d *decoder) parameters(field string, known func(key string) (bool, error)) error {
	if err := d.open(field, '{'); err != nil {
		return err
	}
	seen := map[string]bool{}
	return d.object(func(key string) error {
		if seen[key] {
			return &fieldError{field, fmt.Sprintf("duplicate key %q", key)}
		}
		seen[key] = true
		if ok, err := known(key); ok || err != nil {
			return err
		}
		if strings.HasPrefix(key, "shared_memory") || key == "classification" {
			return &fieldError{field + "." + key, "not supported by this server (send the data in the body, ask for the raw outputs)"}
		}
		return d.skipValue(0)
	})
}

func (d *decoder) boolean(field string) (bool, error) {
	c, err := d.peek()
	if err != nil {
		return false, err
	}
	switch c {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	}
	return false, &fieldError{field, "not true or false"}
}

// skipValue reads past one JSON value, keeping nothing of it.
func (d *decoder) skipValue(depth int) error {
	if depth > maxSkipDepth {
		return d.syntax(fmt.Sprintf("a value nested over %d deep", maxSkipDepth))
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch c {
	case '{':
		d.skip()
		return d.object(func(string) error { return d.skipValue(depth + 1) })
	case '[':
		d.skip()
		return d.array(func(int) error { return d.skipValue(depth + 1) })
	case '"':
		d.skip()
		_, err := d.str(maxKeyBytes, "a string parameter")
		return err
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	_, err = d.number(nil)
	return err
}

// array reads the elements of an array whose '[' is consumed, calling elem for each with its index.
func (d *decoder) array(elem func(i int) error) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if c == ']' {
		d.skip()
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		c, err := d.nextIn()
		if err != nil {
			return err
		}
		if c == ']' {
			return nil
		}
		if c != ',' {
			return d.syntax("expected ',' or ']' in an array")
		}
	}
}

// inferInputs reads "inputs": an array of objects, each a distinct input of r.
func (d *decoder) inferInputs(r *Runner) ([]*inferInput, error) {
	if err := d.open("inputs", '['); err != nil {
		return nil, err
	}
	specs := r.Inputs()
	var out []*inferInput
	names := map[string]int{}
	err := d.array(func(i int) error {
		if i >= len(specs) {
			return &fieldError{fmt.Sprintf("inputs[%d]", i), fmt.Sprintf("more inputs than the model's %d (%s)", len(specs), specNames(specs))}
		}
		in := &inferInput{field: fmt.Sprintf("inputs[%d]", i), binarySize: -1}
		if err := d.inferInput(in, specs, r.BatchSizes()); err != nil {
			return err
		}
		if j, dup := names[in.spec.Name]; dup {
			return &fieldError{in.f("name"), fmt.Sprintf("input %q is given twice (inputs[%d] and inputs[%d])", in.spec.Name, j, i)}
		}
		names[in.spec.Name] = i
		out = append(out, in)
		return nil
	})
	return out, err
}

func specNames(specs []TensorSpec) string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// inferInput reads one input object into in, checking each field against the named input's spec.
func (d *decoder) inferInput(in *inferInput, specs []TensorSpec, batches []int) error {
	if err := d.open(in.field, '{'); err != nil {
		return err
	}
	seen := map[string]bool{}
	err := d.object(func(key string) error {
		if seen[key] {
			return &fieldError{in.field, fmt.Sprintf("duplicate key %q", key)}
		}
		seen[key] = true
		switch key {
		case "name":
			name, err := d.stringField(in.f("name"), maxKeyBytes)
			if err != nil {
				return err
			}
			for i := range specs {
				if specs[i].Name == name {
					in.spec = &specs[i]
				}
			}
			if in.spec == nil {
				return &fieldError{in.f("name"), fmt.Sprintf("%q is not an input of this model (it takes %s)", name, specNames(specs))}
			}
			return in.checkSpec(batches)
		case "shape":
			var err error
			if in.shape, err = d.shape(in.f("shape")); err != nil {
				return err
			}
			return in.checkSpec(batches)
		case "datatype":
			var err error
			if in.datatype, err = d.stringField(in.f("datatype"), 32); err != nil {
				return err
			}
			return in.checkSpec(batches)
		case "parameters":
			return d.parameters(in.f("parameters"), func(k string) (bool, error) {
				if k != "binary_data_size" {
					return false, nil
				}
				if _, err := d.peek(); err != nil {
					return true, err
				}
				num, err := d.number(nil)
				if err != nil {
					return true, &fieldError{in.f("parameters.binary_data_size"), "not a byte count"}
				}
				n, err := strconv.ParseInt(string(num), 10, 64)
				if err != nil || n < 0 {
					return true, &fieldError{in.f("parameters.binary_data_size"), fmt.Sprintf("%s is not a byte count", num)}
				}
				in.binarySize = n
				return true, nil
			})
		case "data":
			if in.spec == nil {
				return &fieldError{in.f("data"), `comes before "name": send each input's name (and shape, datatype) before its data`}
			}
			in.hasData = true
			return d.inputData(in, batches)
		}
		return d.syntax(fmt.Sprintf("%s: unknown field %q (an input holds name, shape, datatype, parameters, data)", in.field, key))
	})
	if err != nil {
		return err
	}
	for _, k := range []string{"name", "shape", "datatype"} {
		if !seen[k] {
			return &fieldError{in.f(k), "missing"}
		}
	}
	return in.checkPayload()
}

// shape reads a shape: an array of at most maxRank non-negative integers.
func (d *decoder) shape(field string) ([]int, error) {
	if err := d.open(field, '['); err != nil {
		return nil, err
	}
	var shape []int
	var num []byte
	err := d.array(func(i int) error {
		if i >= maxRank {
			return &fieldError{field, fmt.Sprintf("over %d axes", maxRank)}
		}
		if _, err := d.peek(); err != nil {
			return err
		}
		var err error
		if num, err = d.number(num); err != nil {
			return &fieldError{field, "not an array of integers"}
		}
		n, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil || n < 0 || n > maxBatch*maxBatch {
			return &fieldError{field, fmt.Sprintf("%s is not a dimension", num)}
		}
		shape = append(shape, int(n))
		return nil
	})
	return shape, err
}

// checkSpec checks what is known of in against its spec, as soon as the fields that it needs
// are read: datatype, then shape (rank, fixed axes, a batch size the bundle has a program for).
func (in *inferInput) checkSpec(batches []int) error {
	if in.spec == nil {
		return nil
	}
	s := in.spec
	if in.datatype != "" && in.datatype != ProtocolDatatype(s.DType) {
		return &fieldError{in.f("datatype"), fmt.Sprintf("%q, input %q takes %s", in.datatype, s.Name, ProtocolDatatype(s.DType))}
	}
	if in.shape == nil {
		return nil
	}
	want := s.ShapeAt(-1)
	bad := len(in.shape) != len(want)
	for j := 0; !bad && j < len(want); j++ {
		bad = j != s.BatchAxis && in.shape[j] != want[j]
	}
	if bad {
		return &fieldError{in.f("shape"), fmt.Sprintf("%v, input %q takes %v (-1: the batch size)", in.shape, s.Name, want)}
	}
	if b := in.shape[s.BatchAxis]; !slices.Contains(batches, b) {
		return &fieldError{in.f("shape"), fmt.Sprintf("batch size %d: the model has programs for batch sizes %v: split or pad the request, or export again with %d among the batch sizes (nitro export --batch-sizes)", b, batches, b)}
	}
	return nil
}

// checkPayload checks, once the input object is read, that its data or binary size matches its
// shape and datatype exactly.
func (in *inferInput) checkPayload() error {
	n, _ := numElements(in.shape) // checkSpec bounded the shape
	switch {
	case in.hasData && in.binarySize >= 0:
		return &fieldError{in.field, `both "data" and parameters.binary_data_size: send one`}
	case in.binarySize >= 0:
		if want := n * int64(in.spec.DType.Size()); in.binarySize != want {
			return &fieldError{in.f("parameters.binary_data_size"), fmt.Sprintf("%d bytes, shape %v of %s is %d", in.binarySize, in.shape, in.datatype, want)}
		}
		return nil
	case !in.hasData:
		return &fieldError{in.f("data"), "missing (and no parameters.binary_data_size)"}
	}
	count := int64(len(in.data) / in.spec.DType.Size())
	if count != n {
		return &fieldError{in.f("data"), fmt.Sprintf("%d elements, shape %v holds %d", count, in.shape, n)}
	}
	if len(in.dims) > 1 && !slices.Equal(in.dims, in.shape) {
		return &fieldError{in.f("data"), fmt.Sprintf("nested as %v, the shape is %v (nest to the shape, or send the data flat)", in.dims, in.shape)}
	}
	return nil
}

// inputData reads "data": flat, or nested arrays whose every array at one depth has one length.
// Elements are decoded as the input's dtype and refused past its declared shape's count, or,
// before a shape, past its largest batch.
func (d *decoder) inputData(in *inferInput, batches []int) error {
	if err := d.open(in.f("data"), '['); err != nil {
		return err
	}
	limit, _ := numElements(in.spec.ShapeAt(batches[len(batches)-1]))
	if in.shape != nil {
		limit, _ = numElements(in.shape)
	}
	st := &flatState{in: in, limit: limit, leaf: -1, num: make([]byte, 0, 32)}
	in.dims = make([]int, maxRank)
	if err := st.array(d, 0); err != nil {
		return err
	}
	in.dims = in.dims[:st.leaf]
	return nil
}

type flatState struct {
	in    *inferInput
	limit int64
	n     int64
	leaf  int // the depth of the elements, -1 until the first
	num   []byte
}

func (st *flatState) array(d *decoder, depth int) error {
	in := st.in
	if depth >= maxRank {
		return &fieldError{in.f("data"), fmt.Sprintf("nested over %d deep", maxRank)}
	}
	count := 0
	err := d.array(func(i int) error {
		count++
		c, err := d.peek()
		if err != nil {
			return err
		}
		if c == '[' {
			d.skip()
			return st.array(d, depth+1)
		}
		if st.leaf == -1 {
			st.leaf = depth + 1
		} else if st.leaf != depth+1 {
			return &fieldError{in.f("data"), fmt.Sprintf("ragged: an element at depth %d, the first at depth %d", depth+1, st.leaf)}
		}
		if st.n == st.limit {
			return &fieldError{in.f("data"), fmt.Sprintf("more than %d elements (shape %v; before a shape, the largest batch)", st.limit, in.spec.ShapeAt(-1))}
		}
		st.n++
		in.data, err = d.element(in.data, &st.num, in.spec.DType)
		if err != nil {
			return &fieldError{in.f("data"), fmt.Sprintf("element %d: %v", st.n-1, err)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if count == 0 {
		return &fieldError{in.f("data"), "an empty array"}
	}
	if in.dims[depth] == 0 { // the first array at this depth to close fixes its length
		in.dims[depth] = count
	} else if in.dims[depth] != count {
		return &fieldError{in.f("data"), fmt.Sprintf("ragged: an array of %d along axis %d, the first holds %d", count, depth, in.dims[depth])}
	}
	return nil
}

// readBinary reads each binary input's bytes, in the order of "inputs", then requires the body's end.
func readBinary(body io.Reader, inputs []*inferInput, headerLen string) error {
	sawBinary := false
	for _, in := range inputs {
		if in.binarySize < 0 {
			continue
		}
		if headerLen == "" {
			return &fieldError{in.f("parameters.binary_data_size"), "binary data needs the " + inferenceHeaderLength + " header"}
		}
		sawBinary = true
		in.data = make([]byte, in.binarySize)
		if n, err := io.ReadFull(body, in.data); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return &fieldError{in.f("parameters.binary_data_size"), fmt.Sprintf("%d bytes, but the body ends after %d of them (%s or the sizes are wrong)", in.binarySize, n, inferenceHeaderLength)}
			}
			return &readError{err}
		}
		if in.spec.DType == tensorfile.BOOL {
			// A BOOL is one byte, 0 or 1: another value would reach the program as neither.
			if i := slices.IndexFunc(in.data, func(b byte) bool { return b > 1 }); i >= 0 {
				return &fieldError{in.f("parameters.binary_data_size"), fmt.Sprintf("BOOL element %d is the byte %d: a BOOL is 0 or 1", i, in.data[i])}
			}
		}
	}
	if headerLen == "" {
		return nil
	}
	var one [1]byte
	if n, err := io.ReadFull(body, one[:]); n > 0 {
		what := "the JSON's binary_data_size values"
		if !sawBinary {
			what = "no input with parameters.binary_data_size"
		}
		return &fieldError{inferenceHeaderLength, fmt.Sprintf("the body holds bytes past the JSON header and %s: the header or the sizes are wrong", what)}
	} else if err != io.EOF && err != io.ErrUnexpectedEOF {
		return &readError{err}
	}
	return nil
}

// assemble checks that the inputs are every input of r at one batch size, and makes them tensors.
func assemble(r *Runner, inputs []*inferInput) (map[string]Tensor, int, error) {
	byName := map[string]*inferInput{}
	for _, in := range inputs {
		byName[in.spec.Name] = in
	}
	out := map[string]Tensor{}
	batch, from := -1, ""
	for _, s := range r.Inputs() {
		in, ok := byName[s.Name]
		if !ok {
			return nil, 0, &fieldError{"inputs", fmt.Sprintf("input %q is missing", s.Name)}
		}
		if b := in.shape[s.BatchAxis]; batch == -1 {
			batch, from = b, in.field
		} else if b != batch {
			return nil, 0, &fieldError{in.f("shape"), fmt.Sprintf("batch size %d, %s has %d", b, from, batch)}
		}
		out[s.Name] = Tensor{DType: s.DType, Shape: in.shape, Data: in.data}
	}
	return out, batch, nil
}

// requestedOutputs reads "outputs": distinct outputs of r, each perhaps asked for as binary.
func (d *decoder) requestedOutputs(r *Runner) ([]requestedOutput, error) {
	if err := d.open("outputs", '['); err != nil {
		return nil, err
	}
	specs := r.Outputs()
	var out []requestedOutput
	err := d.array(func(i int) error {
		field := fmt.Sprintf("outputs[%d]", i)
		if i >= len(specs) {
			return &fieldError{field, fmt.Sprintf("more outputs than the model's %d (%s)", len(specs), specNames(specs))}
		}
		if err := d.open(field, '{'); err != nil {
			return err
		}
		var o requestedOutput
		seen := map[string]bool{}
		if err := d.object(func(key string) error {
			if seen[key] {
				return &fieldError{field, fmt.Sprintf("duplicate key %q", key)}
			}
			seen[key] = true
			switch key {
			case "name":
				var err error
				o.name, err = d.stringField(field+".name", maxKeyBytes)
				return err
			case "parameters":
				return d.parameters(field+".parameters", func(k string) (bool, error) {
					if k != "binary_data" {
						return false, nil
					}
					v, err := d.boolean(field + ".parameters.binary_data")
					o.binary = v
					return true, err
				})
			}
			return d.syntax(fmt.Sprintf("%s: unknown field %q (an output holds name, parameters)", field, key))
		}); err != nil {
			return err
		}
		if !seen["name"] {
			return &fieldError{field + ".name", "missing"}
		}
		if !slices.ContainsFunc(specs, func(s TensorSpec) bool { return s.Name == o.name }) {
			return &fieldError{field + ".name", fmt.Sprintf("%q is not an output of this model (it has %s)", o.name, specNames(specs))}
		}
		if slices.ContainsFunc(out, func(p requestedOutput) bool { return p.name == o.name }) {
			return &fieldError{field + ".name", fmt.Sprintf("output %q is asked for twice", o.name)}
		}
		out = append(out, o)
		return nil
	})
	return out, err
}

func errorsAsInput(err error) bool { return errors.As(err, new(*InputError)) }
