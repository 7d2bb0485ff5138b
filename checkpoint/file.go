package checkpoint

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nitro-go/nitro/runstatus"
	"github.com/nitro-go/nitro/tensorfile"
)

// Option configures Write, TopK and EveryN.
type Option func(*options)

type options struct {
	fs    FS
	retry retry
}

func newOptions(opts []Option) options {
	o := options{fs: OSFS{}, retry: defaultRetry}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithFS routes every file operation through fsys (default OSFS).
func WithFS(fsys FS) Option { return func(o *options) { o.fs = fsys } }

// WithIORetry sets the retry of a durable write: attempts tries in all (at least 1), waiting
// base, then twice as long each time (capped at 5 s), on transient errors only. The default
// is 3 attempts from 100 ms.
func WithIORetry(attempts int, base time.Duration) Option {
	return func(o *options) { o.retry.attempts, o.retry.base = max(attempts, 1), max(base, 0) }
}

// Write writes r to path durably: complete under that name or absent, even across a crash.
func Write(path string, r *Record, opts ...Option) error {
	o := newOptions(opts)
	return writeRecord(o.fs, o.retry, path, r)
}

func writeRecord(fsys FS, rt retry, path string, r *Record) error {
	hdr, err := encodeHeader(r) // refuse a bad record before touching the disk
	if err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	return writeDurable(fsys, rt, path, func(w io.Writer) error { return writeEncoded(w, hdr, r) })
}

// Read reads and validates a whole record. The file is untrusted: any defect is a
// *FormatError naming the file and the field. When a manifest beside the file lists it, the
// manifest's epoch, step, stop reason and score must agree with the record.
func Read(path string) (*Record, error) { return readRecord(OSFS{}, path) }

func readRecord(fsys FS, path string) (*Record, error) {
	rc, size, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read: %w", err)
	}
	defer rc.Close()
	r, err := decode(path, rc, size)
	if err != nil {
		return nil, err
	}
	if err := crossCheck(fsys, path, r.Epoch, r.Step, r.StopReason, r.Metrics); err != nil {
		return nil, err
	}
	return r, nil
}

// crossCheck compares the manifest entry listing path, if any, with what its record says. The
// record is under its checksum and the manifest is not, so a disagreement means the manifest
// was edited or the file replaced by another; either way neither can be trusted to resume.
func crossCheck(fsys FS, path string, epoch, step int, stop runstatus.Status, metrics map[string]float64) error {
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	m, err := readManifest(fsys, dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: checking it against its directory's manifest: %w", path, err)
	}
	i := slices.IndexFunc(m.Checkpoints, func(e ManifestEntry) bool { return e.File == base })
	if i < 0 {
		return nil // not listed: a copy elsewhere, or a displaced file
	}
	e := m.Checkpoints[i]
	var diffs []string
	if e.Epoch != epoch {
		diffs = append(diffs, fmt.Sprintf("epoch: manifest %d, record %d", e.Epoch, epoch))
	}
	if e.Step != step {
		diffs = append(diffs, fmt.Sprintf("step: manifest %d, record %d", e.Step, step))
	}
	if e.StopReason != stop {
		diffs = append(diffs, fmt.Sprintf("stop_reason: manifest %q, record %q", e.StopReason, stop))
	}
	if e.Score != nil {
		if v, ok := metrics[e.Metric]; !ok {
			diffs = append(diffs, fmt.Sprintf("score: manifest %v for metric %q, which the record lacks", *e.Score, e.Metric))
		} else if math.Float64bits(v) != math.Float64bits(*e.Score) {
			diffs = append(diffs, fmt.Sprintf("score: manifest %v, record's %s %v", *e.Score, e.Metric, v))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("checkpoint: %s disagrees with %s (checkpoints[%d]) on %s: the manifest was edited or the file replaced; restore the right file, or resume from another checkpoint by its path",
		path, filepath.Join(dir, ManifestName), i, strings.Join(diffs, "; "))
}

// Header is what a checkpoint says about itself, read from its header alone.
type Header struct {
	Epoch      int
	Step       int
	Preset     string
	RunID      string
	RunURL     string
	StopReason runstatus.Status
	Metrics    map[string]float64
	Position   Position
	Build      string
	Values     Values       // the experiment's values as recorded (what rebuilds the experiment)
	Tensors    []TensorInfo // in file order, without data
}

// TensorInfo is a tensor's name, dtype and shape.
type TensorInfo struct {
	Name  string
	DType tensorfile.DType
	Shape []int
}

// Info reads a checkpoint's header, validated as Read does (the header's own checksum, the
// record, the manifest's agreement), without reading the tensors' data.
func Info(path string) (*Header, error) { return readInfo(OSFS{}, path) }

func readInfo(fsys FS, path string) (*Header, error) {
	rc, size, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: info: %w", err)
	}
	defer rc.Close()
	h, err := decodeInfo(path, rc, size)
	if err != nil {
		return nil, err
	}
	if err := crossCheck(fsys, path, h.Epoch, h.Step, h.StopReason, h.Metrics); err != nil {
		return nil, err
	}
	return h, nil
}

func decodeInfo(file string, r io.Reader, size int64) (*Header, error) {
	p, err := decodeHeader(file, r, size)
	if err != nil {
		return nil, err
	}
	m, err := recordMetaOf(file, p)
	if err != nil {
		return nil, err
	}
	h := &Header{
		Epoch: m.Epoch, Step: m.Step, Preset: m.Preset, RunID: m.RunID, RunURL: m.RunURL,
		StopReason: m.StopReason, Metrics: m.Metrics, Position: m.Position, Build: m.Build,
		Values:  m.Values,
		Tensors: make([]TensorInfo, len(p.Entries)),
	}
	for i, e := range p.Entries {
		h.Tensors[i] = TensorInfo{Name: e.Name, DType: e.DType, Shape: e.Shape}
	}
	return h, nil
}
