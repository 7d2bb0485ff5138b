package exportbundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// deepJSON is JSON nested n levels: objects (a manifest's shape) or arrays.
func deepJSON(n int, objects bool) []byte {
	if objects {
		return []byte(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
	}
	return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
}

// TestReadRefusesDeepManifest: a bundle whose manifest.json nests 200k levels (400 kB) is refused
// in milliseconds, naming the file and the limit, before the duplicate-key check and the decoder
// see it (the duplicate-key check took over a minute on it, so run-bundle and serve hung).
func TestReadRefusesDeepManifest(t *testing.T) {
	for _, objects := range []bool{true, false} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), deepJSON(200_000, objects), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := Read(dir)
		if d := time.Since(start); d > time.Second {
			t.Errorf("objects %v: refused after %v, want milliseconds", objects, d)
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Path != filepath.Join(dir, ManifestFile) || !errors.Is(err, tensorfile.ErrTooDeep) ||
			!strings.Contains(err.Error(), fmt.Sprintf("more than %d levels", tensorfile.MaxJSONDepth)) {
			t.Errorf("objects %v: err = %v, want a *FormatError naming %s and the limit %d", objects, err, ManifestFile, tensorfile.MaxJSONDepth)
		}
	}
}
