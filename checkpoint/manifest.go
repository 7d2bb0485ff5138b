package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/nitro-go/nitro/runstatus"

	"github.com/nitro-go/nitro/tensorfile"
)

// ManifestName is the manifest's file name inside a checkpoint directory.
const ManifestName = "manifest.json"

const manifestVersion = 1

// maxManifest bounds what ReadManifest reads: a manifest lists a handful of files. A variable
// only so a test can lower it rather than stream 64 MiB.
var maxManifest int64 = 64 << 20

// maxName bounds a manifest entry's metric and stop reason, short names both.
const maxName = 1024

// ManifestEntry is one checkpoint the directory holds.
type ManifestEntry struct {
	File       string           `json:"file"` // base name
	Epoch      int              `json:"epoch"`
	Step       int              `json:"step"`
	Metric     string           `json:"metric,omitempty"` // the metric Score is of
	Score      *float64         `json:"score"`            // nil: not scored (no validation)
	StopReason runstatus.Status `json:"stop_reason,omitempty"`
}

// manifest is the file: the checkpoints oldest first (the last one is the newest), and the
// displaced files whose removal is pending (a crash or an error came between the manifest
// write and the removal); the next write removes them.
type manifest struct {
	Version     int             `json:"version"`
	Checkpoints []ManifestEntry `json:"checkpoints"`
	Displaced   []string        `json:"displaced,omitempty"`
}

// ReadManifest lists the checkpoints in dir, oldest first, without opening one. A missing
// directory or one without a manifest is an empty answer, not an error; a malformed manifest
// is an error naming the file.
func ReadManifest(dir string) ([]ManifestEntry, error) {
	m, err := readManifest(OSFS{}, dir)
	if err != nil {
		return nil, err
	}
	return m.Checkpoints, nil
}

func readManifest(fsys FS, dir string) (*manifest, error) {
	path := filepath.Join(dir, ManifestName)
	rc, size, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &manifest{Version: manifestVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read manifest: %w", err)
	}
	defer rc.Close()
	if size > maxManifest {
		return nil, fmt.Errorf("checkpoint: manifest %s: %d bytes, more than %d", path, size, maxManifest)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read manifest %s: %w", path, err)
	}
	if int64(len(b)) > maxManifest { // the file grew after Open, or its size was not known
		return nil, fmt.Errorf("checkpoint: manifest %s: more than %d bytes", path, maxManifest)
	}
	return parseManifest(path, b)
}

func parseManifest(path string, b []byte) (*manifest, error) {
	bad := func(format string, args ...any) (*manifest, error) {
		return nil, fmt.Errorf("checkpoint: manifest %s: %s", path, fmt.Sprintf(format, args...))
	}
	// Nesting past tensorfile.MaxJSONDepth first, in one pass over the bytes, then a key twice.
	if err := tensorfile.CheckUniqueKeys(b); err != nil {
		return bad("%v", err)
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return bad("%v", err)
	}
	if dec.More() {
		return bad("data after the JSON object")
	}
	if m.Version != manifestVersion {
		return bad("version %d, this reader knows %d", m.Version, manifestVersion)
	}
	seen := map[string]bool{}
	for i, e := range m.Checkpoints {
		if err := validBase(e.File); err != nil {
			return bad("checkpoints[%d].file: %v", i, err)
		}
		if seen[e.File] {
			return bad("checkpoints[%d].file: %q listed twice", i, e.File)
		}
		seen[e.File] = true
		if e.Epoch < 0 || e.Step < 0 {
			return bad("checkpoints[%d]: epoch %d, step %d: negative (both count from 0)", i, e.Epoch, e.Step)
		}
		if e.Epoch > MaxEpoch {
			return bad("checkpoints[%d].epoch: %s", i, boundMsg(e.Epoch, MaxEpoch))
		}
		if e.Step > MaxStep {
			return bad("checkpoints[%d].step: %s", i, boundMsg(e.Step, MaxStep))
		}
		if e.Score != nil && (math.IsNaN(*e.Score) || math.IsInf(*e.Score, 0)) {
			return bad("checkpoints[%d].score: not finite", i)
		}
		if e.Score != nil && e.Metric == "" {
			return bad("checkpoints[%d].metric: missing beside a score", i)
		}
		if len(e.Metric) > maxName || len(e.StopReason) > maxName {
			return bad("checkpoints[%d]: metric or stop_reason longer than %d bytes", i, maxName)
		}
	}
	for i, f := range m.Displaced {
		if err := validBase(f); err != nil {
			return bad("displaced[%d]: %v", i, err)
		}
	}
	if m.Checkpoints == nil {
		m.Checkpoints = []ManifestEntry{}
	}
	return &m, nil
}

func writeManifest(fsys FS, rt retry, dir string, m *manifest) error {
	m.Version = manifestVersion
	if m.Checkpoints == nil {
		m.Checkpoints = []ManifestEntry{}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: manifest: %w", err)
	}
	b = append(b, '\n')
	return writeDurable(fsys, rt, filepath.Join(dir, ManifestName), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
