package exportbundle

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/tensorfile"
)

// CheckProgramInputs reads the signature of each of r's StableHLO programs (the "mlir" format)
// and checks its parameters against the manifest: the inputs, in order, each of its declared
// dtype and of its shape at the program's batch size. A program that takes something else would
// be refused by PJRT at the first request with an error about a buffer's size; this one names
// the input, the dtype and shape the manifest declares and what the program takes. A program it
// cannot read (HLO, or a signature it does not parse) is not checked. Serve (ServeModels) calls
// it for each bundle before listening; nitro run-bundle before running.
func CheckProgramInputs(r *Runner) error {
	for _, batch := range r.BatchSizes() {
		p := r.b.Programs[batch]
		if p.Format != "mlir" {
			continue
		}
		params, ok := mainParams(string(p.Code))
		if !ok {
			continue
		}
		for i, spec := range r.b.Inputs {
			if i >= len(params) {
				return fmt.Errorf("exportbundle: bundle %q: %s takes %d parameters, fewer than the manifest's %d inputs: the manifest and the program disagree (export the bundle again)",
					r.Name(), programFileName(batch, p.Format), len(params), len(r.b.Inputs))
			}
			want := spec.ShapeAt(batch)
			if got := params[i]; got.dtype != spec.DType || !slices.Equal(got.shape, want) {
				return fmt.Errorf("exportbundle: bundle %q: input %q: the manifest declares %s %v, but %s takes only %s there (its parameter %d): the manifest and the program disagree (export the bundle again, or correct the input in %s)",
					r.Name(), spec.Name, spec.DType, want, programFileName(batch, p.Format), got, i, ManifestFile)
			}
		}
	}
	return nil
}

// param is one parameter of a program's main function.
type param struct {
	dtype tensorfile.DType // "" for an element type no bundle holds
	elem  string           // the element type as the program writes it (f32, ui8, ...)
	shape []int
}

func (p param) String() string {
	if p.dtype != "" {
		return fmt.Sprintf("%s %v", p.dtype, p.shape)
	}
	return fmt.Sprintf("%s %v", p.elem, p.shape)
}

// mlirDTypes maps StableHLO element types to bundle dtypes.
var mlirDTypes = map[string]tensorfile.DType{
	"i1": tensorfile.BOOL, "i8": tensorfile.I8, "si8": tensorfile.I8, "ui8": tensorfile.U8,
	"i16": tensorfile.I16, "si16": tensorfile.I16, "ui16": tensorfile.U16,
	"i32": tensorfile.I32, "si32": tensorfile.I32, "ui32": tensorfile.U32,
	"i64": tensorfile.I64, "si64": tensorfile.I64, "ui64": tensorfile.U64,
	"f16": tensorfile.F16, "bf16": tensorfile.BF16, "f32": tensorfile.F32, "f64": tensorfile.F64,
}

// mainParams parses the parameters of "@main(...)" in a StableHLO module's text: each
// "%name: tensor<AxBxT>" (attributes after it are skipped). ok is false when the text has no such
// signature or a parameter is not a ranked tensor of static shape.
func mainParams(code string) (params []param, ok bool) {
	i := strings.Index(code, "@main(")
	if i < 0 {
		return nil, false
	}
	rest := code[i+len("@main("):]
	depth, start := 0, 0
	var args []string
scan:
	for j := 0; j < len(rest); j++ {
		switch rest[j] {
		case '(', '<', '{', '[':
			depth++
		case ')', '>', '}', ']':
			if depth == 0 && rest[j] == ')' {
				args = append(args, rest[start:j])
				break scan
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, rest[start:j])
				start = j + 1
			}
		case '"':
			k := strings.IndexByte(rest[j+1:], '"')
			if k < 0 {
				return nil, false
			}
			j += k + 1
		}
		if j == len(rest)-1 {
			return nil, false // no closing parenthesis
		}
	}
	if len(args) == 1 && strings.TrimSpace(args[0]) == "" {
		return nil, true
	}
	for _, a := range args {
		p, ok := parseTensorType(a)
		if !ok {
			return nil, false
		}
		params = append(params, p)
	}
	return params, true
}

// parseTensorType reads the first "tensor<...>" in s.
func parseTensorType(s string) (param, bool) {
	i := strings.Index(s, "tensor<")
	if i < 0 {
		return param{}, false
	}
	body := s[i+len("tensor<"):]
	end := strings.IndexByte(body, '>')
	if end < 0 {
		return param{}, false
	}
	parts := strings.Split(body[:end], "x")
	p := param{elem: strings.TrimSpace(parts[len(parts)-1]), shape: []int{}}
	if strings.ContainsAny(p.elem, ",:<") { // an encoding or a layout: not a plain tensor type
		return param{}, false
	}
	for _, d := range parts[:len(parts)-1] {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n < 0 {
			return param{}, false // dynamic (?) or unreadable
		}
		p.shape = append(p.shape, n)
	}
	p.dtype = mlirDTypes[p.elem]
	return p, true
}
