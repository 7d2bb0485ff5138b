package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// tooDeep is what a refusal of deep nesting says: the limit.
var tooDeep = fmt.Sprintf("more than %d levels", tensorfile.MaxJSONDepth)

// deepRecord is a signed checkpoint file whose record nests its metrics n levels deep.
func deepRecord(n int) []byte {
	return signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{\"format\":2,`+minRecord+
		`,\"metrics\":`+strings.Repeat("[", n)+strings.Repeat("]", n)+`}"}}`, nil)
}

// TestReadManifestRefusesDeep: a run dir's manifest.json nested 200k levels (400 kB) is refused in
// milliseconds, naming the file and the limit, before the duplicate-key check and the decoder
// (nitro ls took 6 s at 80k levels and over a minute at 200k).
func TestReadManifestRefusesDeep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ManifestName)
	deep := strings.Repeat(`{"checkpoints":`, 200_000) + "[]" + strings.Repeat("}", 200_000)
	if err := os.WriteFile(path, []byte(deep), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := ReadManifest(dir)
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %v, want milliseconds", d)
	}
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tooDeep) {
		t.Errorf("err = %v, want one naming %s and saying %q", err, path, tooDeep)
	}
}

// TestRecordRefusesDeep: a checkpoint whose record nests a value past the limit is refused by the
// depth scan, before the record's keys are read, naming the file and the field; one nested past
// encoding/json's own limit (10000) likewise.
func TestRecordRefusesDeep(t *testing.T) {
	for _, n := range []int{tensorfile.MaxJSONDepth, 9000, 200_000} {
		b := deepRecord(n)
		start := time.Now()
		_, err := decode("deep.ckpt", bytes.NewReader(b), int64(len(b)))
		if d := time.Since(start); d > time.Second {
			t.Errorf("%d levels: refused after %v, want milliseconds", n, d)
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.File != "deep.ckpt" || fe.Field != metaKey+"."+keyRecord || !strings.Contains(fe.Msg, tooDeep) {
			t.Errorf("%d levels: err = %v, want a *FormatError naming the file and %s.%s, saying %q", n, err, metaKey, keyRecord, tooDeep)
		}
	}
}

// FuzzParseManifest: a run dir's manifest.json, as nitro ls, a resume and the checkpointer read
// it, never panics, is refused naming the file, and what it accepts survives a round trip.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"version":1,"checkpoints":[{"file":"a.ckpt","epoch":1,"step":2,"metric":"val_loss","score":0.5}],"displaced":["b.ckpt"]}`))
	f.Add([]byte(`{"version":1,"checkpoints":[{"file":"a.ckpt","file":"b.ckpt"}]}`))
	f.Add([]byte(strings.Repeat(`{"checkpoints":`, 200_000) + "[]" + strings.Repeat("}", 200_000)))
	f.Add([]byte(`{"version":1,"checkpoints":` + strings.Repeat("[", tensorfile.MaxJSONDepth) + strings.Repeat("]", tensorfile.MaxJSONDepth) + `}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest("fuzz/manifest.json", b)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz/manifest.json") {
				t.Fatalf("error %v does not name the file", err)
			}
			return
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseManifest("again", again); err != nil {
			t.Fatalf("accepted, then refused after a round trip: %v", err)
		}
	})
}
