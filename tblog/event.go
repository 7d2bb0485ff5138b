package tblog

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of the messages an event file holds (TensorBoard's event.proto,
// summary.proto, tensor.proto and types.proto), only those this package writes.
const (
	eventWallTime    protowire.Number = 1 // double
	eventStep        protowire.Number = 2 // int64
	eventFileVersion protowire.Number = 3 // string
	eventSummary     protowire.Number = 5 // Summary

	summaryValue protowire.Number = 1 // repeated Summary.Value

	valueTag         protowire.Number = 1 // string
	valueSimpleValue protowire.Number = 2 // float
	valueTensor      protowire.Number = 8 // TensorProto
	valueMetadata    protowire.Number = 9 // SummaryMetadata

	metadataPluginData protowire.Number = 1 // SummaryMetadata.PluginData
	metadataDataClass  protowire.Number = 4 // DataClass enum

	pluginName protowire.Number = 1 // string; content (2) stays empty: the text plugin's version 0

	tensorDType     protowire.Number = 1 // DataType enum
	tensorShape     protowire.Number = 2 // TensorShapeProto; empty is a scalar
	tensorStringVal protowire.Number = 8 // repeated bytes

	dtString        = 7 // DT_STRING
	dataClassTensor = 2 // DATA_CLASS_TENSOR: what the text plugin's tensors are
	textPlugin      = "text"
)

// FileVersion is the first event of every file: readers check it to know the format.
const FileVersion = "brain.Event:2"

// scalar is one simple_value of a summary.
type scalar struct {
	tag   string
	value float32
}

// appendEventHead starts an Event with the fields every event carries.
func appendEventHead(b []byte, wallTime float64, step int64) []byte {
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallTime))
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(step))
}

// versionEvent is the file's opening event.
func versionEvent(wallTime float64) []byte {
	b := appendEventHead(nil, wallTime, 0)
	b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
	return protowire.AppendString(b, FileVersion)
}

// scalarEvent is one Event whose summary holds every scalar, in the order given.
func scalarEvent(wallTime float64, step int64, values []scalar) []byte {
	var sum []byte
	for _, s := range values {
		var v []byte
		v = protowire.AppendTag(v, valueTag, protowire.BytesType)
		v = protowire.AppendString(v, s.tag)
		v = protowire.AppendTag(v, valueSimpleValue, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(s.value))
		sum = appendMessage(sum, summaryValue, v)
	}
	return appendMessage(appendEventHead(nil, wallTime, step), eventSummary, sum)
}

// textEvent is one Event holding a text summary: a scalar string tensor marked for the text
// plugin, which renders it as Markdown. The metadata goes on every value, not only a tag's
// first, so each event stands alone (a resumed run's new file included).
func textEvent(wallTime float64, step int64, tag, text string) []byte {
	var plugin []byte
	plugin = protowire.AppendTag(plugin, pluginName, protowire.BytesType)
	plugin = protowire.AppendString(plugin, textPlugin)
	var meta []byte
	meta = appendMessage(meta, metadataPluginData, plugin)
	meta = protowire.AppendTag(meta, metadataDataClass, protowire.VarintType)
	meta = protowire.AppendVarint(meta, dataClassTensor)

	var tensor []byte
	tensor = protowire.AppendTag(tensor, tensorDType, protowire.VarintType)
	tensor = protowire.AppendVarint(tensor, dtString)
	tensor = appendMessage(tensor, tensorShape, nil)
	tensor = protowire.AppendTag(tensor, tensorStringVal, protowire.BytesType)
	tensor = protowire.AppendString(tensor, text)

	var v []byte
	v = protowire.AppendTag(v, valueTag, protowire.BytesType)
	v = protowire.AppendString(v, tag)
	v = appendMessage(v, valueTensor, tensor)
	v = appendMessage(v, valueMetadata, meta)
	return appendMessage(appendEventHead(nil, wallTime, step), eventSummary, appendMessage(nil, summaryValue, v))
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is the record checksum: CRC-32C rotated and offset, so that a CRC stored inside
// checksummed data does not checksum to a fixed pattern.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendRecord frames data as one TFRecord: little-endian uint64 length, the length's masked
// CRC, the data, the data's masked CRC.
func appendRecord(b, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	b = append(b, n[:]...)
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(n[:]))
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(data))
}
