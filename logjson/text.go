package logjson

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// textEncoder is FormatText's zapcore.Encoder, for a terminal that reads like plain text: "[level: ]message[  key value]...", one
// line per entry. Floats print with four decimals, like the plain text it replaces; fields added
// with With come first, sorted by key. It is not safe for concurrent use (zap clones it per
// logger and locks the writer).
type textEncoder struct {
	*zapcore.MapObjectEncoder
}

var textPool = buffer.NewPool()

// NewTextEncoder is FormatText's encoder, for a zapcore.Core of the caller's own (NewDiagnostics
// builds one with it).
func NewTextEncoder() zapcore.Encoder { return newTextEncoder() }

func newTextEncoder() *textEncoder { return &textEncoder{zapcore.NewMapObjectEncoder()} }

// Clone implements zapcore.Encoder.
func (e *textEncoder) Clone() zapcore.Encoder {
	c := newTextEncoder()
	for k, v := range e.Fields {
		c.Fields[k] = v
	}
	return c
}

// EncodeEntry implements zapcore.Encoder.
func (e *textEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	b := textPool.Get()
	switch {
	case ent.Level == zapcore.InfoLevel:
	case ent.Level == zapcore.WarnLevel:
		b.AppendString("warning: ")
	default:
		b.AppendString(ent.Level.String())
		b.AppendString(": ")
	}
	b.AppendString(ent.Message)
	appendPairs(b, e.Fields)
	for _, f := range fields {
		m := zapcore.NewMapObjectEncoder()
		f.AddTo(m)
		appendPairs(b, m.Fields)
	}
	if ent.Stack != "" {
		b.AppendString("\n")
		b.AppendString(ent.Stack)
	}
	b.AppendString("\n")
	return b, nil
}

// appendPairs writes "  key value" for each entry of m, sorted by key.
func appendPairs(b *buffer.Buffer, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.AppendString("  ")
		b.AppendString(k)
		b.AppendString(" ")
		b.AppendString(textValue(m[k]))
	}
}

func textValue(v any) string {
	switch x := v.(type) {
	case float64:
		return textFloat(x)
	case float32:
		return textFloat(float64(x))
	case string:
		return x
	case time.Duration:
		return x.String()
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case []byte:
		return strconv.Quote(string(x))
	default:
		return fmt.Sprint(x)
	}
}

func textFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}
