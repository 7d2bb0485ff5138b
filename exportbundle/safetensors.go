package exportbundle

import (
	"bytes"
	"fmt"

	"github.com/nitro-go/nitro/checkpoint"
)

// The weights file is the safetensors format as the checkpoint module writes and reads it
// (checkpoint.EncodeTensors / DecodeTensors): one hostile-input reader for both artifacts,
// refusing duplicate names, holes, overlaps and overflowing shapes alike.

const safetensorsMetaKey = "__metadata__"

// Weight is one named weight tensor.
type Weight struct {
	Name string
	Tensor
}

// encodeSafetensors writes ws, in order, as a safetensors file.
func encodeSafetensors(ws []Weight) ([]byte, error) {
	ts := make([]checkpoint.Tensor, len(ws))
	for i, w := range ws {
		if w.Name == safetensorsMetaKey {
			return nil, fmt.Errorf("weight name %q is reserved by safetensors", w.Name)
		}
		ts[i] = checkpoint.Tensor{Name: w.Name, DType: checkpoint.DType(w.DType), Shape: w.Shape, Data: w.Data}
	}
	var buf bytes.Buffer
	if err := checkpoint.EncodeTensors(&buf, ts, map[string]string{"format": FormatName}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeSafetensors parses a safetensors file with the checkpoint reader's checks, then this
// format's own (a dtype a bundle holds, the rank bound). The tensors come back in data order;
// their Data alias data.
func decodeSafetensors(data []byte) ([]Weight, error) {
	ts, _, err := checkpoint.DecodeTensors(WeightsFile, data)
	if err != nil {
		return nil, err
	}
	ws := make([]Weight, len(ts))
	for i, t := range ts {
		w := Weight{Name: t.Name, Tensor: Tensor{DType: DType(t.DType), Shape: t.Shape, Data: t.Data}}
		if !w.DType.Valid() {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", w.Name, w.DType)
		}
		if len(w.Shape) > maxRank {
			return nil, fmt.Errorf("tensor %q: rank %d (at most %d)", w.Name, len(w.Shape), maxRank)
		}
		ws[i] = w
	}
	return ws, nil
}
