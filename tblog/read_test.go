package tblog

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// event is what the tests read back of one record: the fields this package writes.
type event struct {
	wallTime    float64
	step        int64
	fileVersion string
	values      []value
}

type value struct {
	tag    string
	simple *float32
	text   *string // the tensor's one string_val
	dtype  uint64
	plugin string
	class  uint64
}

// readRecords splits data into TFRecord payloads, checking both CRCs of each.
func readRecords(data []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 12 {
			return out, fmt.Errorf("offset %d: %d bytes left, a header takes 12", off, len(data)-off)
		}
		head := data[off : off+8]
		if got, want := binary.LittleEndian.Uint32(data[off+8:]), maskedCRC(head); got != want {
			return out, fmt.Errorf("offset %d: length CRC %#x, want %#x", off, got, want)
		}
		n := binary.LittleEndian.Uint64(head)
		off += 12
		if uint64(len(data)-off) < n+4 {
			return out, fmt.Errorf("offset %d: record of %d bytes cut short", off, n)
		}
		payload := data[off : off+int(n)]
		if got, want := binary.LittleEndian.Uint32(data[off+int(n):]), maskedCRC(payload); got != want {
			return out, fmt.Errorf("offset %d: data CRC %#x, want %#x", off, got, want)
		}
		out = append(out, payload)
		off += int(n) + 4
	}
	return out, nil
}

func readEventFile(t *testing.T, path string) []event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readRecords(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []event
	for i, r := range recs {
		var e event
		if err := decodeEvent(r, &e); err != nil {
			t.Fatalf("%s: record %d: %v", path, i, err)
		}
		out = append(out, e)
	}
	return out
}

// fields calls f for each field of msg; f returns how many bytes of the value it consumed.
func fields(msg []byte, f func(num protowire.Number, typ protowire.Type, b []byte) int) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		m := f(num, typ, msg)
		if m == 0 {
			m = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if m < 0 {
			return protowire.ParseError(m)
		}
		msg = msg[m:]
	}
	return nil
}

func decodeEvent(b []byte, e *event) error {
	var inner error
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			e.wallTime = math.Float64frombits(v)
			return n
		case num == eventStep && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			e.step = int64(v)
			return n
		case num == eventFileVersion && typ == protowire.BytesType:
			v, n := protowire.ConsumeString(b)
			e.fileVersion = v
			return n
		case num == eventSummary && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n >= 0 {
				inner = fields(v, func(num protowire.Number, typ protowire.Type, b []byte) int {
					if num != summaryValue || typ != protowire.BytesType {
						return 0
					}
					vb, n := protowire.ConsumeBytes(b)
					var val value
					if err := decodeValue(vb, &val); err != nil && inner == nil {
						inner = err
					}
					e.values = append(e.values, val)
					return n
				})
			}
			return n
		}
		return 0
	})
	if err != nil {
		return err
	}
	return inner
}

func decodeValue(b []byte, v *value) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch {
		case num == valueTag && typ == protowire.BytesType:
			s, n := protowire.ConsumeString(b)
			v.tag = s
			return n
		case num == valueSimpleValue && typ == protowire.Fixed32Type:
			x, n := protowire.ConsumeFixed32(b)
			f := math.Float32frombits(x)
			v.simple = &f
			return n
		case num == valueTensor && typ == protowire.BytesType:
			tb, n := protowire.ConsumeBytes(b)
			fields(tb, func(num protowire.Number, typ protowire.Type, b []byte) int {
				switch {
				case num == tensorDType && typ == protowire.VarintType:
					d, n := protowire.ConsumeVarint(b)
					v.dtype = d
					return n
				case num == tensorStringVal && typ == protowire.BytesType:
					s, n := protowire.ConsumeString(b)
					v.text = &s
					return n
				}
				return 0
			})
			return n
		case num == valueMetadata && typ == protowire.BytesType:
			mb, n := protowire.ConsumeBytes(b)
			fields(mb, func(num protowire.Number, typ protowire.Type, b []byte) int {
				switch {
				case num == metadataPluginData && typ == protowire.BytesType:
					pb, n := protowire.ConsumeBytes(b)
					fields(pb, func(num protowire.Number, typ protowire.Type, b []byte) int {
						if num == pluginName && typ == protowire.BytesType {
							s, n := protowire.ConsumeString(b)
							v.plugin = s
							return n
						}
						return 0
					})
					return n
				case num == metadataDataClass && typ == protowire.VarintType:
					c, n := protowire.ConsumeVarint(b)
					v.class = c
					return n
				}
				return 0
			})
			return n
		}
		return 0
	})
}
