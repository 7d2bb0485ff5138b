package export

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/tensorfile"
)

// exportWeight is one weight candidate: a parameter or layer-state variable and its value, read
// back from the device.
type exportWeight struct {
	name string // the checkpoint's name: "param/<keypath>" or "state<scope>/<name>"
	v    *context.Variable
	t    exportbundle.Tensor
}

// bundleTensor is a weight read back to the host, as a bundle tensor.
func bundleTensor(name string, dtype dtypes.DType, shape []int, data []byte) (exportbundle.Tensor, error) {
	dt := tensorfile.DTypeOf(dtype)
	if !dt.Valid() {
		return exportbundle.Tensor{}, fmt.Errorf("%s: dtype %s cannot be held in a bundle", name, dtype)
	}
	if !littleEndian {
		return exportbundle.Tensor{}, errors.New("bundles hold little-endian data and this host is big-endian")
	}
	return exportbundle.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

// littleEndian: a bundle's data is little-endian and the view's weights hold native bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// gomlxTensor makes a fresh host tensor of shape s holding t's bytes.
func gomlxTensor(t exportbundle.Tensor, s shapes.Shape) (*tensors.Tensor, error) {
	h := tensors.FromShape(s)
	if s.Size() == 0 {
		return h, nil
	}
	var short bool
	err := h.MutableBytes(func(b []byte) {
		short = len(b) != len(t.Data)
		copy(b, t.Data)
	})
	if err == nil && short {
		err = fmt.Errorf("%d bytes for %s", len(t.Data), s)
	}
	return h, err
}

// readWeights reads the view's weights (the parameters and layer state) back to the host as
// bundle tensors, named as a checkpoint names them: the candidates, of which the program keeps
// the ones Forward reads.
func readWeights(m *core.ModelView) ([]exportWeight, error) {
	ws, err := m.Weights()
	if err != nil {
		return nil, err
	}
	cands := make([]exportWeight, 0, len(ws))
	for _, w := range ws {
		t, err := bundleTensor(w.Name, w.DType, w.Shape, w.Data)
		if err != nil {
			return nil, err
		}
		cands = append(cands, exportWeight{name: w.Name, v: w.Var, t: t})
	}
	return cands, nil
}

// freezeDevice reads each Device field's current value back to the host, in declaration order:
// the values the export view freezes into the program.
func freezeDevice(m *core.ModelView) (*frozenDevice, error) {
	devs, err := m.Device()
	if err != nil {
		return nil, err
	}
	fz := &frozenDevice{names: make([]string, len(devs)), values: make(map[string]*tensors.Tensor, len(devs))}
	for i, d := range devs {
		if !tensorfile.DTypeOf(d.Value.DType()).Valid() {
			return nil, fmt.Errorf("Device field %s: dtype %s cannot be held in a bundle", d.Name, d.Value.DType())
		}
		fz.names[i] = d.Name
		fz.values[d.Name] = d.Value
	}
	return fz, nil
}
