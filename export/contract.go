package export

import (
	"fmt"
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/prefetch"
)

// Contract is what an experiment declares about the program it exports: the ExportSpec fields
// that are the model's, not the call site's (what a client sends and gets back). An experiment
// declares it with an ExportContract method, so `nitro export` and a Go Export write the same
// bundle without either restating it. Each field means what the ExportSpec field of its name
// means.
type Contract struct {
	Inputs                      []string
	WireInputs                  []prefetch.FieldSpec
	Preprocess                  func(wire map[string]*graph.Node) map[string]*graph.Node
	Outputs                     []ExportOutput
	Postprocess                 string
	ClientInputs, ClientOutputs []exportbundle.TensorSpec
}

// ExportContracter is the optional experiment method Export reads the Contract from, once, on
// the host. An ExportSpec that sets any contract field (Inputs, WireInputs, Preprocess, Outputs,
// Postprocess, ClientInputs, ClientOutputs) is the call site choosing another contract: the
// method is then not called, and the ExportSpec is used as given.
type ExportContracter interface {
	ExportContract() Contract
}

// setsContract reports whether spec sets any field a Contract declares.
func setsContract(spec ExportSpec) bool {
	return spec.Inputs != nil || spec.WireInputs != nil || spec.Preprocess != nil || spec.Outputs != nil ||
		spec.Postprocess != "" || spec.ClientInputs != nil || spec.ClientOutputs != nil
}

// withContract fills spec's contract fields from the experiment's ExportContract when it has one
// and spec sets none. A method of that name with another type is refused: export would
// otherwise ignore it and write a bundle the experiment did not declare.
func withContract(m *core.ModelView, spec ExportSpec) (ExportSpec, error) {
	e := m.Experiment()
	meth, ok := reflect.TypeOf(e).MethodByName("ExportContract")
	if !ok {
		return spec, nil
	}
	h, hook := e.(ExportContracter)
	if !hook {
		return spec, fmt.Errorf("experiment %s has an ExportContract method of type %s, which export would ignore: define func (e *%s) ExportContract() export.Contract", m.TypeName(), meth.Type, m.TypeName())
	}
	if setsContract(spec) {
		return spec, nil
	}
	c, err := callContract(h)
	if err != nil {
		return spec, err
	}
	spec.Inputs, spec.WireInputs, spec.Preprocess, spec.Outputs = c.Inputs, c.WireInputs, c.Preprocess, c.Outputs
	spec.Postprocess, spec.ClientInputs, spec.ClientOutputs = c.Postprocess, c.ClientInputs, c.ClientOutputs
	return spec, nil
}

func callContract(h ExportContracter) (c Contract, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("ExportContract", r)
		}
	}()
	return h.ExportContract(), nil
}
