package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"github.com/nitro-go/nitro/tensorfile"
	"math"
	"reflect"
	"testing"
)

// f32s is little-endian float32 data.
func f32s(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// fill is n deterministic bytes that depend on seed.
func fill(seed uint64, n int) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// sampleRecord is a small record with every field set and several dtypes, including a
// scalar and an empty tensor.
func sampleRecord() *Record {
	return &Record{
		Tensors: []Tensor{
			{Name: "dense/0/weights", DType: tensorfile.F32, Shape: []int{2, 3}, Data: f32s(1, -2, 3.5, 0, float32(math.Inf(1)), -0.25)},
			{Name: "dense/0/biases", DType: tensorfile.F32, Shape: []int{3}, Data: f32s(0.5, 0.25, -1)},
			{Name: "opt/adam/step", DType: tensorfile.I64, Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, 4500)},
			{Name: "opt/adam/m", DType: tensorfile.F64, Shape: []int{2}, Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e-300)), math.Float64bits(-7))},
			{Name: "bn/mask", DType: tensorfile.BOOL, Shape: []int{3}, Data: []byte{1, 0, 1}},
			{Name: "half", DType: tensorfile.F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}},   // 1, -2
			{Name: "brain", DType: tensorfile.BF16, Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x40, 0xc0}}, // 1, -3
			{Name: "ids", DType: tensorfile.I32, Shape: []int{1, 2}, Data: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
			{Name: "bytes", DType: tensorfile.U8, Shape: []int{4}, Data: []byte{0, 1, 254, 255}},
			{Name: "empty", DType: tensorfile.F32, Shape: []int{0, 5}, Data: []byte{}},
		},
		Epoch:      6,
		Step:       4500,
		Metrics:    map[string]float64{"val_loss": 0.041683123456789, "accuracy": 0.987, "lost": math.NaN(), "big": math.Inf(-1)},
		StopReason: "early_stop",
		Preset:     "mnist-tiny",
		RunID:      "run-20250101-abc",
		RunURL:     "https://example.invalid/runs/abc",
		Values: Values{
			GraphConst: map[string]string{"hidden": "64", "activation": "relu"},
			Device:     map[string]string{"aux_weight": "0.25"},
			Host:       map[string]string{"log_every": "10"},
		},
		Derived:         map[string]string{"steps_per_epoch": "750"},
		AnchorChecksums: map[string]string{"backbone": "sha256:0123abcd"},
		LoggerType:      "logjson.Logger",
		LoggerState:     json.RawMessage(`{"offset":1234,"path":"runs/x/log.jsonl"}`),
		RNGState:        []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24},
		Position:        Position{Epoch: 7, Batch: 0, GlobalBatch: 256, EpochBatches: 19},
		Build:           "github.com/nitro-go/nitro/cmd@v0.0.0 vcs.revision=abc",
	}
}

// epochRecord is a record whose content is a function of epoch and size, for verification.
func epochRecord(epoch, size int, score float64) *Record {
	return &Record{
		Tensors: []Tensor{
			{Name: "w", DType: tensorfile.U8, Shape: []int{size}, Data: fill(uint64(epoch), size)},
			{Name: "b", DType: tensorfile.F32, Shape: []int{1}, Data: f32s(float32(epoch))},
		},
		Epoch:   epoch,
		Step:    epoch * 100,
		Metrics: map[string]float64{"val_loss": score},
	}
}

// checkEpochRecord verifies a record epochRecord made.
func checkEpochRecord(t testing.TB, r *Record) {
	t.Helper()
	w, ok := r.Tensor("w")
	if !ok || !bytes.Equal(w.Data, fill(uint64(r.Epoch), len(w.Data))) {
		t.Fatalf("epoch %d: tensor w does not hold its epoch's content", r.Epoch)
	}
	if r.Step != r.Epoch*100 {
		t.Fatalf("epoch %d: step %d", r.Epoch, r.Step)
	}
}

// sameRecord requires a and b to be equal, floats and bytes bitwise.
func sameRecord(t testing.TB, got, want *Record) {
	t.Helper()
	if len(got.Metrics) != len(want.Metrics) {
		t.Fatalf("metrics: got %v, want %v", got.Metrics, want.Metrics)
	}
	for k, v := range want.Metrics {
		g, ok := got.Metrics[k]
		if !ok || math.Float64bits(g) != math.Float64bits(v) {
			t.Fatalf("metric %q: got %v (%x), want %v (%x)", k, g, math.Float64bits(g), v, math.Float64bits(v))
		}
	}
	g, w := *got, *want
	g.Metrics, w.Metrics = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("records differ:\n got %+v\nwant %+v", g, w)
	}
}

func encodeBytes(t testing.TB, r *Record) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// craft is a file made of a header (not padded) and data.
func craft(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}
