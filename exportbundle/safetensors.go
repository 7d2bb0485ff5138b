package exportbundle

import (
	"bytes"
	"fmt"

	"github.com/nitro-go/nitro/tensorfile"
)

// The weights file is the safetensors format as tensorfile writes and reads it: one
// hostile-input reader for checkpoints and bundles alike, refusing duplicate names, holes,
// overlaps and overflowing shapes.

// Weight is one named weight tensor.
type Weight struct {
	Name string
	Tensor
}

// encodeSafetensors writes ws, in order, as a safetensors file.
func encodeSafetensors(ws []Weight) ([]byte, error) {
	ts := make([]tensorfile.Tensor, len(ws))
	for i, w := range ws {
		if w.Name == tensorfile.MetadataKey {
			return nil, fmt.Errorf("weight name %q is reserved by safetensors", w.Name)
		}
		ts[i] = tensorfile.Tensor{Name: w.Name, DType: w.DType, Shape: w.Shape, Data: w.Data}
	}
	var buf bytes.Buffer
	if err := tensorfile.Encode(&buf, ts, map[string]string{"format": FormatName}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeSafetensors parses a safetensors file with tensorfile's checks, then this format's own
// (the rank bound, each tensor as Tensor.check accepts it). The tensors come back in data order.
func decodeSafetensors(data []byte) ([]Weight, error) {
	ts, _, err := tensorfile.Decode(WeightsFile, data)
	if err != nil {
		return nil, err
	}
	ws := make([]Weight, len(ts))
	for i, t := range ts {
		w := Weight{Name: t.Name, Tensor: Tensor{DType: t.DType, Shape: t.Shape, Data: t.Data}}
		if len(w.Shape) > maxRank {
			return nil, fmt.Errorf("tensor %q: rank %d (at most %d)", w.Name, len(w.Shape), maxRank)
		}
		// The file's checks bound the bytes; a bundle also bounds the element count, which a
		// zero dimension keeps at zero bytes whatever the other dimensions are.
		if err := w.check(); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", w.Name, err)
		}
		ws[i] = w
	}
	return ws, nil
}
