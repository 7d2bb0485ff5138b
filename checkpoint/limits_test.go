package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A negative epoch or step is refused wherever a record or a manifest entry carries one: by
// Save, by Write, by Read of a file that holds one, and in the manifest.
func TestNegativeEpochOrStep(t *testing.T) {
	for _, c := range []struct{ epoch, step int }{{-1, 0}, {0, -1}, {-3, -300}} {
		r := epochRecord(1, 8, 0.5)
		r.Epoch, r.Step = c.epoch, c.step
		want := "epoch " + strconv.Itoa(c.epoch) + ", step " + strconv.Itoa(c.step)

		dir := t.TempDir()
		tk, err := NewTopK(2, "val_loss", "min", dir, nil, fast)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Save(r); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "negative") {
			t.Errorf("Save of epoch %d step %d: %v; want a refusal naming both", c.epoch, c.step, err)
		}
		path := filepath.Join(dir, "x"+Ext)
		if err := Write(path, r); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("Write of epoch %d step %d: %v; want a refusal naming both and the file", c.epoch, c.step, err)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Errorf("a refused record left %d files in %s", len(names), dir)
		}

		// A file that holds one (written by something else) is a FormatError on that field.
		field := "__metadata__.nitro.record.epoch"
		if c.epoch >= 0 {
			field = "__metadata__.nitro.record.step"
		}
		// The edit keeps the header's length (spaces pad it), so only the values change.
		good := epochRecord(1, 8, 0.5)
		good.Step = 100000
		b := encodeBytes(t, good)
		from := `\"epoch\":1,\"step\":100000`
		to := `\"epoch\":` + strconv.Itoa(c.epoch) + `,\"step\":` + strconv.Itoa(c.step)
		b = bytes.Replace(b, []byte(from), []byte(to+strings.Repeat(" ", len(from)-len(to))), 1)
		if bytes.Equal(b, encodeBytes(t, good)) {
			t.Fatal("the test's edit of the record JSON did not apply")
		}
		sign(b[8 : 8+binary.LittleEndian.Uint64(b)]) // signed again, as a writer that got it wrong would
		os.WriteFile(path, b, 0o644)
		var fe *FormatError
		if _, err := Read(path); !errors.As(err, &fe) || fe.Field != field || fe.File != path {
			t.Errorf("Read of a file with epoch %d step %d: %v; want a FormatError on %s", c.epoch, c.step, err, field)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, ManifestName)
	os.WriteFile(path, []byte(`{"version":1,"checkpoints":[{"file":"a","epoch":2,"step":-5,"score":null}]}`), 0o644)
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "checkpoints[0]: epoch 2, step -5: negative") || !strings.Contains(err.Error(), path) {
		t.Errorf("manifest with a negative step: %v", err)
	}
}

// sizedFS serves the manifest from body and reports size for it, as a file that grows after
// Open, or a file system that cannot tell the size, would.
type sizedFS struct {
	FS
	size int64
	body func() io.Reader
}

func (s sizedFS) Open(path string) (io.ReadCloser, int64, error) {
	if filepath.Base(path) == ManifestName {
		return io.NopCloser(s.body()), s.size, nil
	}
	return s.FS.Open(path)
}

// The manifest is read up to maxManifest bytes: a file over it is refused with its path and the
// bound, whether its size says so up front or only its content does.
func TestManifestSizeLimit(t *testing.T) {
	// A sparse file one byte over the bound: refused from its size, before any read.
	dir := t.TempDir()
	path := filepath.Join(dir, ManifestName)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, maxManifest+1); err != nil {
		t.Fatal(err)
	}
	want := "more than " + strconv.FormatInt(maxManifest, 10)
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
		t.Errorf("a manifest of %d bytes: %v; want a refusal naming %s and %q", maxManifest+1, err, path, want)
	}
	tk, _ := NewTopK(1, "val_loss", "min", dir, nil, fast)
	if _, err := tk.Save(epochRecord(1, 8, 0.5)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Save over an oversized manifest: %v", err)
	}

	// A manifest whose size is not known up front (0) but whose content runs past the bound:
	// valid JSON padded with spaces, which the decoder alone would accept. The bound is lowered
	// so the test streams kilobytes, not 64 MiB.
	defer func(old int64) { maxManifest = old }(maxManifest)
	maxManifest = 4 << 10
	want = "more than " + strconv.FormatInt(maxManifest, 10)
	valid := `{"version":1,"checkpoints":[]}`
	over := sizedFS{FS: NewMemFS(), size: 0, body: func() io.Reader {
		return io.MultiReader(strings.NewReader(valid), io.LimitReader(spaces{}, maxManifest+1-int64(len(valid))))
	}}
	if _, err := readManifest(over, "/run"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a manifest that runs past %d bytes: %v; want %q", maxManifest, err, want)
	}
	// The control: the same manifest at exactly the bound reads.
	at := over
	at.body = func() io.Reader {
		return io.MultiReader(strings.NewReader(valid), io.LimitReader(spaces{}, maxManifest-int64(len(valid))))
	}
	if m, err := readManifest(at, "/run"); err != nil || len(m.Checkpoints) != 0 {
		t.Errorf("a manifest of exactly %d bytes: %v, %v", maxManifest, m, err)
	}
}

// spaces is an endless reader of JSON whitespace.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
