package exportbundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"

	"github.com/nitro-go/nitro/tensorfile"
)

// The bundle layout.
const (
	// FormatName is the manifest's "format" value.
	FormatName = "nitro-exportbundle"
	// FormatVersion is the manifest version this package writes and the newest it reads.
	FormatVersion = 1

	ManifestFile    = "manifest.json"
	WeightsFile     = "weights.safetensors"
	PostprocessFile = "postprocess.txt"

	maxManifestBytes = 16 << 20
	maxRank          = 32
	maxBatchSizes    = 64
	maxBatch         = 1 << 20
)

// ErrNewerFormat is wrapped by the error Read returns for a bundle written by a newer format
// version than this package reads.
var ErrNewerFormat = errors.New("bundle format version is newer than this reader")

// FormatError is a bundle that cannot be read: Path names the file at fault (or the directory).
type FormatError struct {
	Path string
	Msg  string
	Err  error // wrapped cause, if any (ErrNewerFormat, an I/O error)
}

func (e *FormatError) Error() string { return "exportbundle: " + e.Path + ": " + e.Msg }
func (e *FormatError) Unwrap() error { return e.Err }

// TensorSpec declares one input or output of the program (or, in ClientInputs/ClientOutputs,
// of the client side of a postprocess).
//
// Shape is the full shape, batch axis included; BatchAxis indexes it (0 is batch-first), or is
// -1 for a tensor with no batch axis (outputs and client specs only). The size at the batch axis
// is a placeholder: the manifest stores -1 there and each entry of the bundle's batch sizes takes
// its place. A -1 elsewhere marks a variable axis, which only client specs may declare.
// AxisLetters, when set, names each non-batch axis in shape order, one ASCII letter each.
type TensorSpec struct {
	Name        string           `json:"name"`
	DType       tensorfile.DType `json:"dtype"`
	Shape       []int            `json:"shape"`
	BatchAxis   int              `json:"batch_axis"`
	AxisLetters string           `json:"axis_letters,omitempty"`
}

// ShapeAt returns the TensorSpec's shape at batch size batch.
func (s TensorSpec) ShapeAt(batch int) []int {
	out := append([]int{}, s.Shape...)
	if s.BatchAxis >= 0 && s.BatchAxis < len(out) {
		out[s.BatchAxis] = batch
	}
	return out
}

// WeightSpec is one weight in the program's argument order.
type WeightSpec struct {
	Name  string           `json:"name"`
	DType tensorfile.DType `json:"dtype"`
	Shape []int            `json:"shape"`
}

// ProgramEntry is the program file compiled for one batch size.
type ProgramEntry struct {
	BatchSize int    `json:"batch_size"`
	Format    string `json:"format"` // PJRT program format: "mlir" (StableHLO) or "hlo"
	File      string `json:"file"`
}

// FileEntry is one file of the bundle besides the manifest, with its size and SHA-256 (hex).
type FileEntry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest is manifest.json. The program takes its arguments in the order Inputs then Weights,
// and returns Outputs in order.
type Manifest struct {
	Format          string            `json:"format"`
	FormatVersion   int               `json:"format_version"`
	Name            string            `json:"name"`
	Inputs          []TensorSpec      `json:"inputs"`
	Outputs         []TensorSpec      `json:"outputs"`
	Weights         []WeightSpec      `json:"weights"`
	WeightsFile     string            `json:"weights_file"`
	BatchSizes      []int             `json:"batch_sizes"`
	Programs        []ProgramEntry    `json:"programs"`
	PostprocessFile string            `json:"postprocess_file,omitempty"`
	ClientInputs    []TensorSpec      `json:"client_inputs,omitempty"`
	ClientOutputs   []TensorSpec      `json:"client_outputs,omitempty"`
	Provenance      map[string]string `json:"provenance,omitempty"`
	// Generator, when set, says the program is a text generator's decode step (see
	// GeneratorSpec): nitro serve then answers a prompt with its continuation.
	Generator *GeneratorSpec `json:"generator,omitempty"`
	Files     []FileEntry    `json:"files"`
}

// programFormats maps each supported PJRT program format to its file extension.
var programFormats = map[string]string{"mlir": "mlir", "hlo": "hlo"}

func programFileName(batch int, format string) string {
	return "program-b" + strconv.Itoa(batch) + "." + programFormats[format]
}

var (
	safeFileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	hexSHA256    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reservedName = regexp.MustCompile(`^(manifest\.json|program-b.*)$`)
)

// ParseManifest decodes and validates manifest.json's bytes. It never panics; its errors are
// *FormatError naming manifest.json, wrapping ErrNewerFormat for a newer format version.
func ParseManifest(data []byte) (*Manifest, error) {
	bad := func(format string, args ...any) error {
		return &FormatError{Path: ManifestFile, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxManifestBytes {
		return nil, bad("%d bytes, more than the %d a manifest may have", len(data), maxManifestBytes)
	}
	// Nesting past tensorfile.MaxJSONDepth is refused first, in one pass over the bytes (wrapping
	// tensorfile.ErrTooDeep); then a key twice, which encoding/json would let the last one win.
	if err := tensorfile.CheckUniqueKeys(data); err != nil {
		return nil, &FormatError{Path: ManifestFile, Msg: err.Error(), Err: err}
	}
	// The version first, leniently, so that a newer bundle is reported as such rather than as
	// whatever unknown field it added.
	var head struct {
		Format        string `json:"format"`
		FormatVersion int    `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, bad("not a JSON manifest: %v", err)
	}
	if head.Format != FormatName {
		return nil, bad("format %q, want %q", head.Format, FormatName)
	}
	if head.FormatVersion > FormatVersion {
		return nil, &FormatError{Path: ManifestFile, Err: ErrNewerFormat,
			Msg: fmt.Sprintf("format_version %d is newer than this reader's %d: read it with a newer nitro", head.FormatVersion, FormatVersion)}
	}
	if head.FormatVersion < 1 {
		return nil, bad("format_version %d is not a version (want 1..%d)", head.FormatVersion, FormatVersion)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("data after the manifest object")
	}
	if err := m.validate(); err != nil {
		return nil, bad("%v", err)
	}
	return &m, nil
}

// specKind says which rules a TensorSpec list obeys.
type specKind int

const (
	kindInput  specKind = iota // batch axis required, fixed dims
	kindOutput                 // batch axis optional, fixed dims
	kindClient                 // batch axis optional, variable (-1) dims allowed
)

func checkSpecs(field string, specs []TensorSpec, kind specKind, batch int) error {
	seen := map[string]bool{}
	for i, s := range specs {
		if err := CheckName(fmt.Sprintf("%s[%d].name", field, i), s.Name); err != nil {
			return err
		}
		what := fmt.Sprintf("%s[%d] %q", field, i, s.Name)
		if seen[s.Name] {
			return fmt.Errorf("%s: name appears twice", what)
		}
		seen[s.Name] = true
		if !s.DType.Valid() {
			return fmt.Errorf("%s: unknown dtype %q", what, s.DType)
		}
		rank := len(s.Shape)
		if rank > maxRank {
			return fmt.Errorf("%s: rank %d (at most %d)", what, rank, maxRank)
		}
		minAxis := -1
		if kind == kindInput {
			minAxis = 0
		}
		if s.BatchAxis < minAxis || s.BatchAxis >= rank {
			return fmt.Errorf("%s: batch_axis %d out of range for shape %v", what, s.BatchAxis, s.Shape)
		}
		fixed := make([]int, 0, rank)
		for j, d := range s.Shape {
			switch {
			case j == s.BatchAxis:
				if d != -1 {
					return fmt.Errorf("%s: shape %v: the batch axis %d must be -1", what, s.Shape, j)
				}
			case d == -1 && kind == kindClient:
			case d < 1:
				return fmt.Errorf("%s: shape %v: dimension %d is %d", what, s.Shape, j, d)
			default:
				fixed = append(fixed, d)
			}
		}
		if _, err := numElements(append(fixed, batch)); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		if s.AxisLetters != "" {
			want := rank
			if s.BatchAxis >= 0 {
				want--
			}
			if len(s.AxisLetters) != want {
				return fmt.Errorf("%s: axis_letters %q: want one letter per non-batch axis (%d)", what, s.AxisLetters, want)
			}
			if err := CheckAxisLetters(s.AxisLetters); err != nil {
				return fmt.Errorf("%s: axis_letters %q: %v", what, s.AxisLetters, err)
			}
		}
	}
	return nil
}

func checkFileName(what, name string) error {
	if !safeFileName.MatchString(name) {
		return fmt.Errorf("%s: file name %q is not a plain file name ([A-Za-z0-9._-], no leading dot)", what, name)
	}
	return nil
}

// validate checks everything the manifest says about itself; Read checks the files against it.
// What a manifest shares with a Spec is checked by the Spec's rules, so an exporter's CheckSpec
// and a reader's ParseManifest cannot disagree.
func (m *Manifest) validate() error {
	spec := Spec{Name: m.Name, Inputs: m.Inputs, BatchSizes: m.BatchSizes,
		ClientInputs: m.ClientInputs, ClientOutputs: m.ClientOutputs, Provenance: m.Provenance}
	if err := spec.check(m.PostprocessFile != ""); err != nil {
		return err
	}
	if len(m.Outputs) == 0 {
		return errors.New("outputs: none declared")
	}
	if err := checkSpecs("outputs", m.Outputs, kindOutput, m.BatchSizes[len(m.BatchSizes)-1]); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, w := range m.Weights {
		if err := CheckName(fmt.Sprintf("weights[%d].name", i), w.Name); err != nil {
			return err
		}
		what := fmt.Sprintf("weights[%d] %q", i, w.Name)
		if seen[w.Name] {
			return fmt.Errorf("%s: name appears twice", what)
		}
		seen[w.Name] = true
		if !w.DType.Valid() {
			return fmt.Errorf("%s: unknown dtype %q", what, w.DType)
		}
		if len(w.Shape) > maxRank {
			return fmt.Errorf("%s: rank %d (at most %d)", what, len(w.Shape), maxRank)
		}
		if n, err := numElements(w.Shape); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		} else if n == 0 {
			return fmt.Errorf("%s: shape %v has no elements", what, w.Shape)
		}
	}
	if m.WeightsFile != WeightsFile {
		return fmt.Errorf("weights_file %q, want %q", m.WeightsFile, WeightsFile)
	}
	if len(m.Programs) != len(m.BatchSizes) {
		return fmt.Errorf("programs: %d entries for %d batch sizes", len(m.Programs), len(m.BatchSizes))
	}
	for i, p := range m.Programs {
		if p.BatchSize != m.BatchSizes[i] {
			return fmt.Errorf("programs[%d]: batch_size %d, batch_sizes[%d] is %d", i, p.BatchSize, i, m.BatchSizes[i])
		}
		if _, ok := programFormats[p.Format]; !ok {
			return fmt.Errorf("programs[%d]: format %q (want mlir or hlo)", i, p.Format)
		}
		if want := programFileName(p.BatchSize, p.Format); p.File != want {
			return fmt.Errorf("programs[%d]: file %q, want %q", i, p.File, want)
		}
	}
	if m.PostprocessFile != "" && m.PostprocessFile != PostprocessFile {
		return fmt.Errorf("postprocess_file %q, want %q", m.PostprocessFile, PostprocessFile)
	}
	if m.Generator != nil {
		if err := m.Generator.check(m.Inputs, m.Outputs, m.BatchSizes); err != nil {
			return err
		}
	}
	return m.checkFiles()
}

// checkFiles checks the file list: plain names, each listed once with a size and a SHA-256,
// every file the manifest uses listed, no reserved name it does not use.
func (m *Manifest) checkFiles() error {
	files := map[string]bool{}
	for i, f := range m.Files {
		what := fmt.Sprintf("files[%d]", i)
		if err := checkFileName(what, f.Name); err != nil {
			return err
		}
		if f.Name == ManifestFile {
			return fmt.Errorf("%s: the manifest cannot list itself", what)
		}
		if files[f.Name] {
			return fmt.Errorf("%s: %q listed twice", what, f.Name)
		}
		files[f.Name] = true
		if f.Size < 0 {
			return fmt.Errorf("%s %q: size %d", what, f.Name, f.Size)
		}
		if !hexSHA256.MatchString(f.SHA256) {
			return fmt.Errorf("%s %q: sha256 %q is not 64 lowercase hex digits", what, f.Name, f.SHA256)
		}
	}
	need := []string{m.WeightsFile}
	for _, p := range m.Programs {
		need = append(need, p.File)
	}
	if m.PostprocessFile != "" {
		need = append(need, m.PostprocessFile)
	}
	for _, n := range need {
		if !files[n] {
			return fmt.Errorf("files: %q is not listed", n)
		}
	}
	for _, f := range m.Files {
		if !slices.Contains(need, f.Name) && (reservedName.MatchString(f.Name) || f.Name == PostprocessFile) {
			return fmt.Errorf("files: %q is a reserved name the manifest does not use", f.Name)
		}
	}
	return nil
}
