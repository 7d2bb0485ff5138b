package exportbundle

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/nitro-go/nitro/tensorfile"
)

// The answer's encoder: an output tensor as nested JSON arrays, integers exact, floats in the
// shortest form that reads back to the same value (as a float64 for F64, a float32 otherwise),
// NaN and ±Inf as strings the decoder accepts ("NaN", "+Inf", "-Inf"), so an answer can be sent
// back as a request.

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
	case tensorfile.BOOL:
		if t.Data[i] != 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case tensorfile.I8, tensorfile.I16, tensorfile.I32, tensorfile.I64:
		var v int64
		switch t.DType {
		case tensorfile.I8:
			v = int64(int8(t.Data[i]))
		case tensorfile.I16:
			v = int64(int16(le.Uint16(t.Data[2*i:])))
		case tensorfile.I32:
			v = int64(int32(le.Uint32(t.Data[4*i:])))
		default:
			v = int64(le.Uint64(t.Data[8*i:]))
		}
		b.Write(strconv.AppendInt(buf[:0], v, 10))
	case tensorfile.U8, tensorfile.U16, tensorfile.U32, tensorfile.U64:
		var v uint64
		switch t.DType {
		case tensorfile.U8:
			v = uint64(t.Data[i])
		case tensorfile.U16:
			v = uint64(le.Uint16(t.Data[2*i:]))
		case tensorfile.U32:
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
			if t.DType == tensorfile.F64 {
				bits = 64
			}
			b.Write(strconv.AppendFloat(buf[:0], f, 'g', -1, bits))
		}
	}
}
