package tblog

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/events.out.tfevents.golden")

// goldenFile is a fixed sequence of events: what the framing and the encoding produce byte for
// byte. The Python test (python_test.go) reads it with TensorBoard's own reader.
const goldenFile = "testdata/events.out.tfevents.golden"

// goldenEvents: a version record, two scalars in one event, a text summary.
func goldenEvents() []byte {
	var b []byte
	b = appendRecord(b, versionEvent(1700000000.25))
	b = appendRecord(b, scalarEvent(1700000001.5, 7, []scalar{{"train/loss", 0.1}, {"val/val_accuracy", -2.5e-7}}))
	b = appendRecord(b, textEvent(1700000002.75, 7, TagParams, "| param | value |\n| --- | --- |\n| seed | 42 |\n"))
	return b
}

func TestGolden(t *testing.T) {
	got := goldenEvents()
	if *update {
		if err := os.WriteFile(goldenFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding differs from %s (%d bytes, want %d); if the change is meant, rerun with -update and check it with the Python test", goldenFile, len(got), len(want))
	}
	evs := readEventFile(t, goldenFile)
	if len(evs) != 3 || evs[0].fileVersion != FileVersion || evs[1].step != 7 || len(evs[1].values) != 2 ||
		*evs[1].values[0].simple != 0.1 || evs[2].values[0].text == nil || evs[2].values[0].plugin != "text" {
		t.Fatalf("golden file reads back as %+v", evs)
	}
}

// TestMaskedCRC pins the mask on CRC-32C's check value (the CRC of "123456789" is 0xe3069283);
// the masked value is the one TensorBoard's reader computes for those bytes.
func TestMaskedCRC(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{
		{"", 0xa282ead8},
		{"123456789", 0xc78ab0e5},
	} {
		if got := maskedCRC([]byte(c.in)); got != c.want {
			t.Errorf("maskedCRC(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// TestRecordCorruption: a flipped bit anywhere in a record fails one of its two CRCs.
func TestRecordCorruption(t *testing.T) {
	rec := appendRecord(nil, []byte("payload"))
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x10
		if _, err := readRecords(bad); err == nil {
			t.Errorf("a flipped bit at byte %d went unnoticed", i)
		}
	}
	if got, err := readRecords(rec); err != nil || len(got) != 1 || string(got[0]) != "payload" {
		t.Fatalf("readRecords = %q, %v", got, err)
	}
}

func TestGoldenName(t *testing.T) {
	// TensorBoard finds event files by "tfevents" in the name.
	if !bytes.Contains([]byte(filepath.Base(goldenFile)), []byte("tfevents")) {
		t.Fatal("the golden file's name must hold tfevents")
	}
}
