package checkpoint

import (
	"fmt"
	"io"
	"time"
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
// *FormatError naming the file and the field.
func Read(path string) (*Record, error) { return readRecord(OSFS{}, path) }

func readRecord(fsys FS, path string) (*Record, error) {
	rc, size, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read: %w", err)
	}
	defer rc.Close()
	return decode(path, rc, size)
}

// Header is what a checkpoint says about itself, read from its header alone.
type Header struct {
	Epoch      int
	Step       int
	Preset     string
	RunID      string
	RunURL     string
	StopReason string
	Metrics    map[string]float64
	Position   Position
	Build      string
	Tensors    []TensorInfo // in file order, without data
}

// TensorInfo is a tensor's name, dtype and shape.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
}

// Info reads a checkpoint's header, validated as Read does, without reading the tensors' data.
func Info(path string) (*Header, error) { return readInfo(OSFS{}, path) }

func readInfo(fsys FS, path string) (*Header, error) {
	rc, size, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: info: %w", err)
	}
	defer rc.Close()
	return decodeInfo(path, rc, size)
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
		Tensors: make([]TensorInfo, len(p.entries)),
	}
	for i, e := range p.entries {
		h.Tensors[i] = TensorInfo{Name: e.name, DType: e.dtype, Shape: e.shape}
	}
	return h, nil
}
