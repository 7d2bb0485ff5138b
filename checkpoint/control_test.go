package checkpoint

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestControlRoundTrip: Control is opaque JSON the caller's run control keeps in the record
// (core's early-stopping state): stored compacted, read back byte for byte, copied by Clone and
// by Memory, refused when it is not JSON, absent from the header when empty.
func TestControlRoundTrip(t *testing.T) {
	r := epochRecord(2, 4, 0.5)
	r.Control = json.RawMessage(`{ "early_stopping": {"best": 0.25, "bad_epochs": 1} }`)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	if err := Write(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"early_stopping":{"best":0.25,"bad_epochs":1}}`; string(got.Control) != want {
		t.Errorf("Control read back as %s, want %s", got.Control, want)
	}
	c := got.Clone()
	got.Control[2] = 'X'
	if !json.Valid(c.Control) || bytes.Equal(c.Control, got.Control) {
		t.Errorf("Clone shares Control's bytes: %s", c.Control)
	}

	m := NewMemory()
	p, err := m.Save(r)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := m.Load(p)
	if !json.Valid(back.Control) || !strings.Contains(string(back.Control), "early_stopping") {
		t.Errorf("Memory lost Control: %s", back.Control)
	}

	bad := epochRecord(1, 4, 0.5)
	bad.Control = json.RawMessage(`{"best":`)
	if err := Encode(new(bytes.Buffer), bad); err == nil {
		t.Error("Encode accepted a Control that is not JSON")
	}

	plain := encodeBytes(t, epochRecord(1, 4, 0.5))
	if bytes.Contains(plain, []byte("control")) {
		t.Error("a record without Control mentions it in its header")
	}
}

// TestTopKRanks: TopK says which metric it ranks by and in which direction, so a caller can
// check the metric exists before training; EveryN ranks nothing.
func TestTopKRanks(t *testing.T) {
	tk, err := NewTopK(3, "val_accuracy", "max", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var c Checkpointer = tk
	r, ok := c.(Ranker)
	if !ok || r.Metric() != "val_accuracy" || r.Mode() != "max" {
		t.Errorf("TopK as Ranker: %v %+v", ok, r)
	}
	en, _ := NewEveryN(2, "", nil)
	if _, ok := Checkpointer(en).(Ranker); ok {
		t.Error("EveryN claims to rank")
	}
	if _, ok := Checkpointer(en).(Adopter); !ok {
		t.Error("EveryN does not adopt a run directory")
	}
}
