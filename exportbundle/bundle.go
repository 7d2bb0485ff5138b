package exportbundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/nitro-go/nitro/tensorfile"
)

// Bundle is an export bundle in memory: what Write takes and Read returns.
//
// The program for each batch size takes the Inputs (at that batch size) and then the Weights, in
// these orders, and returns the Outputs in order.
type Bundle struct {
	Name    string
	Inputs  []TensorSpec
	Outputs []TensorSpec
	Weights []Weight
	// Programs holds one program per batch size, exactly as captured (see Capture).
	Programs map[int]Program
	// Postprocess is the client-side postprocess source, written as postprocess.txt; "" for none.
	Postprocess   string
	ClientInputs  []TensorSpec // only with a Postprocess
	ClientOutputs []TensorSpec // only with a Postprocess
	Provenance    map[string]string
	// Extra holds further files by name (e.g. a working-tree patch), covered by the manifest's
	// checksums like every other file. Names are plain file names, none of the bundle's own.
	Extra map[string][]byte
	// Generator, when set, says the program is a text generator's decode step (GeneratorSpec).
	Generator *GeneratorSpec
}

// BatchSizes returns the batch sizes the bundle has programs for, ascending.
func (b *Bundle) BatchSizes() []int {
	out := make([]int, 0, len(b.Programs))
	for n := range b.Programs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// normalized copies specs with -1 at each batch axis, the manifest's spelling.
func normalized(specs []TensorSpec) []TensorSpec {
	if specs == nil {
		return nil
	}
	out := make([]TensorSpec, len(specs))
	for i, s := range specs {
		s.Shape = append([]int{}, s.Shape...)
		if s.BatchAxis >= 0 && s.BatchAxis < len(s.Shape) {
			s.Shape[s.BatchAxis] = -1
		}
		out[i] = s
	}
	return out
}

func fileEntry(name string, data []byte) FileEntry {
	sum := sha256.Sum256(data)
	return FileEntry{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

// encode validates b and returns its manifest and every file's bytes by name (manifest included).
// With full false it only validates: the weights file is not encoded (nor listed right).
func (b *Bundle) encode(full bool) (*Manifest, map[string][]byte, error) {
	m := &Manifest{
		Format:        FormatName,
		FormatVersion: FormatVersion,
		Name:          b.Name,
		Inputs:        normalized(b.Inputs),
		Outputs:       normalized(b.Outputs),
		WeightsFile:   WeightsFile,
		ClientInputs:  normalized(b.ClientInputs),
		ClientOutputs: normalized(b.ClientOutputs),
		Provenance:    b.Provenance,
		BatchSizes:    b.BatchSizes(),
		Generator:     b.Generator.clone(),
	}
	files := map[string][]byte{}
	add := func(name string, data []byte) {
		files[name] = data
		m.Files = append(m.Files, fileEntry(name, data))
	}
	for _, w := range b.Weights {
		if w.Name == tensorfile.MetadataKey {
			return nil, nil, fmt.Errorf("weight name %q is reserved by safetensors", w.Name)
		}
		if err := w.check(); err != nil {
			return nil, nil, fmt.Errorf("weight %q: %v", w.Name, err)
		}
		m.Weights = append(m.Weights, WeightSpec{Name: w.Name, DType: w.DType, Shape: append([]int{}, w.Shape...)})
	}
	for _, n := range m.BatchSizes {
		p := b.Programs[n]
		if _, ok := programFormats[p.Format]; !ok {
			return nil, nil, fmt.Errorf("program for batch size %d: format %q (want mlir or hlo)", n, p.Format)
		}
		if len(p.Code) == 0 {
			return nil, nil, fmt.Errorf("program for batch size %d: empty", n)
		}
		e := ProgramEntry{BatchSize: n, Format: p.Format, File: programFileName(n, p.Format)}
		m.Programs = append(m.Programs, e)
		add(e.File, p.Code)
	}
	var weights []byte
	if full {
		var err error
		if weights, err = encodeSafetensors(b.Weights); err != nil {
			return nil, nil, err
		}
	}
	add(WeightsFile, weights)
	if b.Postprocess != "" {
		if !utf8.ValidString(b.Postprocess) {
			return nil, nil, errors.New("postprocess: not UTF-8 text")
		}
		m.PostprocessFile = PostprocessFile
		add(PostprocessFile, []byte(b.Postprocess))
	}
	extra := make([]string, 0, len(b.Extra))
	for name := range b.Extra {
		extra = append(extra, name)
	}
	slices.Sort(extra)
	for _, name := range extra {
		if err := checkFileName("extra file", name); err != nil {
			return nil, nil, err
		}
		if _, taken := files[name]; taken || name == ManifestFile || name == PostprocessFile || reservedName.MatchString(name) {
			return nil, nil, fmt.Errorf("extra file %q: the name is the bundle's own", name)
		}
		add(name, b.Extra[name])
	}
	if err := m.validate(); err != nil {
		return nil, nil, err
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	files[ManifestFile] = append(mj, '\n')
	return m, files, nil
}

// Write writes b as a bundle directory at dir, atomically (tensorfile.WriteDir): the files are
// written and synced in a temporary sibling directory that is then renamed to dir, so dir is
// either absent (or left empty) or a complete bundle. dir must not exist or be an empty
// directory. b is validated first, with the rules Read applies.
func Write(dir string, b *Bundle) (err error) {
	if b == nil {
		return errors.New("exportbundle: Write: nil bundle")
	}
	_, files, err := b.encode(true)
	if err != nil {
		return fmt.Errorf("exportbundle: Write %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if name != ManifestFile {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]tensorfile.DirFile, 0, len(files))
	for _, name := range append(names, ManifestFile) { // the manifest last
		out = append(out, tensorfile.DirFile{Name: name, Data: files[name]})
	}
	if err := tensorfile.WriteDir(dir, out); err != nil {
		var we *tensorfile.WriteError
		if errors.As(err, &we) && we.Op == "fsync directory" {
			return fmt.Errorf("exportbundle: Write: %s written, but syncing its directory: %w", dir, we.Err)
		}
		return fmt.Errorf("exportbundle: Write: %w", err)
	}
	return nil
}

// Read reads and verifies the bundle at dir. It trusts nothing: the manifest is validated, every
// file it lists must be a regular file (no symlinks) of the listed size and SHA-256, the weights
// file must hold exactly the listed weights, and errors are *FormatError naming the file at fault
// (wrapping ErrNewerFormat for a bundle from a newer format version). It never panics.
func Read(dir string) (*Bundle, error) {
	bad := func(file, format string, args ...any) error {
		return &FormatError{Path: filepath.Join(dir, file), Msg: fmt.Sprintf(format, args...)}
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, &FormatError{Path: dir, Msg: "not readable", Err: err}
	} else if !st.IsDir() {
		return nil, bad("", "not a directory")
	}
	mdata, err := readRegular(dir, ManifestFile, -1)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(mdata)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Path = filepath.Join(dir, fe.Path)
		}
		return nil, err
	}
	data := map[string][]byte{}
	for _, f := range m.Files {
		d, err := readRegular(dir, f.Name, f.Size)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(d)
		if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
			return nil, bad(f.Name, "sha256 %s, the manifest says %s: the file was modified after export", got, f.SHA256)
		}
		data[f.Name] = d
	}

	b := &Bundle{
		Name:          m.Name,
		Inputs:        m.Inputs,
		Outputs:       m.Outputs,
		Programs:      map[int]Program{},
		ClientInputs:  m.ClientInputs,
		ClientOutputs: m.ClientOutputs,
		Provenance:    m.Provenance,
		Generator:     m.Generator,
	}
	own := map[string]bool{m.WeightsFile: true}
	for _, p := range m.Programs {
		own[p.File] = true
		if len(data[p.File]) == 0 {
			return nil, bad(p.File, "empty program")
		}
		b.Programs[p.BatchSize] = Program{Format: p.Format, Code: data[p.File]}
	}
	ws, err := decodeSafetensors(data[m.WeightsFile])
	if err != nil {
		return nil, bad(m.WeightsFile, "%v", err)
	}
	byName := map[string]Weight{}
	for _, w := range ws {
		byName[w.Name] = w
	}
	if len(ws) != len(m.Weights) {
		return nil, bad(m.WeightsFile, "%d tensors, the manifest lists %d weights", len(ws), len(m.Weights))
	}
	for _, spec := range m.Weights {
		w, ok := byName[spec.Name]
		if !ok {
			return nil, bad(m.WeightsFile, "no tensor %q, which the manifest lists", spec.Name)
		}
		if w.DType != spec.DType || !slices.Equal(w.Shape, spec.Shape) {
			return nil, bad(m.WeightsFile, "tensor %q is %s%v, the manifest says %s%v", spec.Name, w.DType, w.Shape, spec.DType, spec.Shape)
		}
		b.Weights = append(b.Weights, w)
	}
	if m.PostprocessFile != "" {
		own[m.PostprocessFile] = true
		p := data[m.PostprocessFile]
		if !utf8.Valid(p) {
			return nil, bad(m.PostprocessFile, "not UTF-8 text")
		}
		if len(p) == 0 {
			return nil, bad(m.PostprocessFile, "empty")
		}
		b.Postprocess = string(p)
	}
	for _, f := range m.Files {
		if !own[f.Name] {
			if b.Extra == nil {
				b.Extra = map[string][]byte{}
			}
			b.Extra[f.Name] = data[f.Name]
		}
	}
	return b, nil
}

// readRegular reads dir/name, which must be a regular file (not a symlink) of size bytes (any
// size up to maxManifestBytes when size is -1).
func readRegular(dir, name string, size int64) ([]byte, error) {
	path := filepath.Join(dir, name)
	bad := func(format string, args ...any) error {
		return &FormatError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
	st, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &FormatError{Path: path, Msg: "missing", Err: err}
		}
		return nil, &FormatError{Path: path, Msg: "not readable", Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, bad("not a regular file (%s)", st.Mode().Type())
	}
	switch {
	case size < 0 && st.Size() > maxManifestBytes:
		return nil, bad("%d bytes, more than the %d a manifest may have", st.Size(), maxManifestBytes)
	case size >= 0 && st.Size() < size:
		return nil, bad("%d bytes, the manifest says %d: truncated", st.Size(), size)
	case size >= 0 && st.Size() > size:
		return nil, bad("%d bytes, the manifest says %d: the file was modified after export", st.Size(), size)
	}
	f, _, err := tensorfile.OpenRegular(path) // a FIFO swapped in since the Lstat is refused, not waited on
	if err != nil {
		return nil, &FormatError{Path: path, Msg: "not readable", Err: err}
	}
	defer f.Close()
	want := st.Size()
	buf := make([]byte, want)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, &FormatError{Path: path, Msg: "changed while being read", Err: err}
	}
	if n, _ := f.Read(make([]byte, 1)); n != 0 {
		return nil, bad("grew while being read")
	}
	return buf, nil
}

// Writer is the export backend: where a finished bundle goes. Core's Export calls it once per
// export; Files (the default) is the on-disk format above, and Memory keeps bundles for tests.
type Writer interface {
	WriteBundle(dir string, b *Bundle) error
}

// Files writes bundles with Write.
type Files struct{}

var _ Writer = Files{}

// WriteBundle implements Writer.
func (Files) WriteBundle(dir string, b *Bundle) error { return Write(dir, b) }

// Memory is an in-memory Writer for tests: it validates a bundle as Write would (encoding its
// manifest) and keeps it by dir. Safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	bundles map[string]*Bundle
}

var _ Writer = (*Memory)(nil)

// WriteBundle implements Writer; a second bundle at the same dir is refused, as on disk.
func (m *Memory) WriteBundle(dir string, b *Bundle) error {
	if b == nil {
		return errors.New("exportbundle: nil bundle")
	}
	if _, _, err := b.encode(true); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bundles == nil {
		m.bundles = map[string]*Bundle{}
	}
	if _, ok := m.bundles[dir]; ok {
		return fmt.Errorf("exportbundle: %s already holds a bundle", dir)
	}
	m.bundles[dir] = b
	return nil
}

// Bundle returns the bundle written at dir.
func (m *Memory) Bundle(dir string) (*Bundle, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bundles[dir]
	return b, ok
}
