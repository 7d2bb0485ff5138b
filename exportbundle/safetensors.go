package exportbundle

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// The safetensors layout: an 8-byte little-endian header length n, n bytes of JSON header
// (padded with spaces so the data starts 8-aligned), then the tensors' bytes back to back.

const (
	maxSafetensorsHeader = 100_000_000 // the reference implementation's bound
	safetensorsMetaKey   = "__metadata__"
)

// Weight is one named weight tensor.
type Weight struct {
	Name string
	Tensor
}

// encodeSafetensors writes ws, in order, as a safetensors file.
func encodeSafetensors(ws []Weight) ([]byte, error) {
	var h bytes.Buffer
	h.WriteString(`{"` + safetensorsMetaKey + `":{"format":"` + FormatName + `"}`)
	var off int64
	for _, w := range ws {
		if w.Name == safetensorsMetaKey {
			return nil, fmt.Errorf("weight name %q is reserved by safetensors", w.Name)
		}
		name, err := json.Marshal(w.Name)
		if err != nil {
			return nil, err
		}
		h.WriteByte(',')
		h.Write(name)
		h.WriteString(`:{"dtype":"` + string(w.DType) + `","shape":[`)
		for j, d := range w.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		end := off + int64(len(w.Data))
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	if h.Len() > maxSafetensorsHeader {
		return nil, fmt.Errorf("safetensors header of %d bytes exceeds %d", h.Len(), maxSafetensorsHeader)
	}
	out := make([]byte, 8, 8+int64(h.Len())+off)
	binary.LittleEndian.PutUint64(out, uint64(h.Len()))
	out = append(out, h.Bytes()...)
	for _, w := range ws {
		out = append(out, w.Data...)
	}
	return out, nil
}

type safetensorsEntry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// decodeSafetensors parses a safetensors file, checking that every tensor's byte range matches
// its dtype and shape and that the ranges tile the data section exactly. The tensors come back
// in data order; their Data alias data.
func decodeSafetensors(data []byte) ([]Weight, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes: too short for a safetensors header", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxSafetensorsHeader || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("header length %d does not fit the file's %d bytes (truncated?)", n, len(data))
	}
	hdr, body := data[8:8+n], data[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	var ws []Weight
	var offs [][2]int64
	for name, msg := range raw {
		if name == safetensorsMetaKey {
			var meta map[string]string
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, fmt.Errorf("header: %s: %v", safetensorsMetaKey, err)
			}
			continue
		}
		var e safetensorsEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		t := Tensor{DType: e.DType, Shape: e.Shape}
		if !t.DType.Valid() {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.Shape) > maxRank {
			return nil, fmt.Errorf("tensor %q: rank %d (at most %d)", name, len(e.Shape), maxRank)
		}
		elems, err := numElements(e.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end > int64(len(body)) {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d,%d] outside the %d data bytes (truncated?)", name, b, end, len(body))
		}
		if end-b != elems*int64(t.DType.Size()) {
			return nil, fmt.Errorf("tensor %q: %d data bytes, %s%v needs %d", name, end-b, t.DType, t.Shape, elems*int64(t.DType.Size()))
		}
		t.Data = body[b:end:end]
		ws = append(ws, Weight{Name: name, Tensor: t})
		offs = append(offs, e.DataOffsets)
	}
	idx := make([]int, len(ws))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(offs[a][0], offs[b][0]) })
	var at int64
	sorted := make([]Weight, len(ws))
	for k, i := range idx {
		if offs[i][0] != at {
			return nil, fmt.Errorf("tensor %q: starts at %d, the previous one ends at %d (gap or overlap)", ws[i].Name, offs[i][0], at)
		}
		at = offs[i][1]
		sorted[k] = ws[i]
	}
	if at != int64(len(body)) {
		return nil, fmt.Errorf("tensors cover %d of the %d data bytes", at, len(body))
	}
	return sorted, nil
}
