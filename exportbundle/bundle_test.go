package exportbundle

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"github.com/nitro-go/nitro/tensorfile"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// tinyBundle is a bundle with placeholder program text: enough for the format, which never
// compiles anything.
func tinyBundle() *Bundle {
	w, _ := NewTensor([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	b, _ := NewTensor([]int{3}, []int32{7, 8, 9})
	return &Bundle{
		Name:    "tiny",
		Inputs:  []TensorSpec{{Name: "img", DType: tensorfile.U8, Shape: []int{1, 5, 5}, BatchAxis: 0, AxisLetters: "wh"}},
		Outputs: []TensorSpec{{Name: "logits", DType: tensorfile.F32, Shape: []int{1, 3}, BatchAxis: 0}, {Name: "scale", DType: tensorfile.F32, Shape: []int{3}, BatchAxis: -1}},
		Weights: []Weight{{Name: "w", Tensor: w}, {Name: "b", Tensor: b}},
		Programs: map[int]Program{
			1: {Format: "mlir", Code: []byte("module @m1 {}\n")},
			8: {Format: "mlir", Code: []byte("module @m8 {}\n")},
		},
		Postprocess:   "softmax(logits)\n",
		ClientOutputs: []TensorSpec{{Name: "prob", DType: tensorfile.F32, Shape: []int{3, 1}, BatchAxis: 1}},
		Provenance:    map[string]string{"git_commit": "abc123", "preset": "small"},
		Extra:         map[string][]byte{"working_tree.patch": []byte("--- a\n+++ b\n")},
	}
}

func writeTiny(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := Write(dir, tinyBundle()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := writeTiny(t)
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := tinyBundle()
	want.Inputs = normalized(want.Inputs)
	want.Outputs = normalized(want.Outputs)
	want.ClientOutputs = normalized(want.ClientOutputs)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
	}
	if bs := got.BatchSizes(); !reflect.DeepEqual(bs, []int{1, 8}) {
		t.Errorf("batch sizes %v", bs)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	wantNames := []string{"manifest.json", "postprocess.txt", "program-b1.mlir", "program-b8.mlir", "weights.safetensors", "working_tree.patch"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("files %v, want %v", names, wantNames)
	}
	// No temporary directory is left beside the bundle.
	if sib, _ := os.ReadDir(filepath.Dir(dir)); len(sib) != 1 {
		t.Errorf("the parent holds %d entries, want only the bundle", len(sib))
	}
	// Reading and writing again gives the same bytes.
	dir2 := filepath.Join(t.TempDir(), "again")
	if err := Write(dir2, got); err != nil {
		t.Fatal(err)
	}
	for _, n := range wantNames {
		a, _ := os.ReadFile(filepath.Join(dir, n))
		b, _ := os.ReadFile(filepath.Join(dir2, n))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs after a read/write round trip", n)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	cases := map[string]func(b *Bundle){
		"no programs":            func(b *Bundle) { b.Programs = nil },
		"empty program":          func(b *Bundle) { b.Programs[1] = Program{Format: "mlir"} },
		"unknown format":         func(b *Bundle) { b.Programs[1] = Program{Format: "vmfb", Code: []byte("x")} },
		"weight data short":      func(b *Bundle) { b.Weights[0].Data = b.Weights[0].Data[1:] },
		"duplicate weight":       func(b *Bundle) { b.Weights[1].Name = "w" },
		"duplicate input":        func(b *Bundle) { b.Inputs = append(b.Inputs, b.Inputs[0]) },
		"input without batch":    func(b *Bundle) { b.Inputs[0].BatchAxis = -1 },
		"axis letters count":     func(b *Bundle) { b.Inputs[0].AxisLetters = "w" },
		"axis letters repeated":  func(b *Bundle) { b.Inputs[0].AxisLetters = "ww" },
		"bad dtype":              func(b *Bundle) { b.Outputs[0].DType = "F128" },
		"client without postpro": func(b *Bundle) { b.Postprocess = "" },
		"extra reserved name":    func(b *Bundle) { b.Extra = map[string][]byte{"program-b2.mlir": nil} },
		"extra path":             func(b *Bundle) { b.Extra = map[string][]byte{"../x": nil} },
		"no name":                func(b *Bundle) { b.Name = "" },
		"no outputs":             func(b *Bundle) { b.Outputs = nil },
		"zero batch":             func(b *Bundle) { b.Programs[0] = b.Programs[1] },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			b := tinyBundle()
			mutate(b)
			dir := filepath.Join(t.TempDir(), "bundle")
			if err := Write(dir, b); err == nil {
				t.Fatal("written")
			}
			if sib, _ := os.ReadDir(filepath.Dir(dir)); len(sib) != 0 {
				t.Errorf("a refused Write left %d entries", len(sib))
			}
		})
	}
	// An existing non-empty directory is not overwritten; an empty one is filled.
	dir := writeTiny(t)
	if err := Write(dir, tinyBundle()); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Write over a bundle: %v", err)
	}
	empty := t.TempDir()
	if err := Write(empty, tinyBundle()); err != nil {
		t.Errorf("Write into an empty directory: %v", err)
	}
}

// readErr reads dir and returns the *FormatError, failing the test on success or another type.
func readErr(t *testing.T, dir string) *FormatError {
	t.Helper()
	_, err := Read(dir)
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("Read: %v (%T), want a *FormatError", err, err)
	}
	return fe
}

func editManifest(t *testing.T, dir string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	data, _ = json.Marshal(m)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadTampered(t *testing.T) {
	type tc struct {
		tamper   func(t *testing.T, dir string)
		file     string // the file the error must name
		contains string
	}
	cases := map[string]tc{
		"truncated program": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, "program-b8.mlir")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o644)
		}, "program-b8.mlir", "truncated"},
		"tampered weights": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, WeightsFile)
			data, _ := os.ReadFile(p)
			data[len(data)-1] ^= 1
			os.WriteFile(p, data, 0o644)
		}, WeightsFile, "modified after export"},
		"grown program": {func(t *testing.T, dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "program-b1.mlir"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte("// more"))
			f.Close()
		}, "program-b1.mlir", "modified after export"},
		"missing postprocess": {func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, PostprocessFile))
		}, PostprocessFile, "missing"},
		"symlinked weights": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, WeightsFile)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		}, WeightsFile, "not a regular file"},
		"future version": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["format_version"] = FormatVersion + 1; m["new_field"] = true })
		}, ManifestFile, "newer"},
		"manifest not JSON": {func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"format": "nitro-exportbundle", `), 0o644)
		}, ManifestFile, "not a JSON manifest"},
		"manifest unknown field": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["surprise"] = 1 })
		}, ManifestFile, "surprise"},
		"manifest weight shape": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				m["weights"].([]any)[0].(map[string]any)["shape"] = []int{3, 2}
			})
		}, WeightsFile, `tensor "w" is F32[2 3], the manifest says F32[3 2]`},
		"manifest hash": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				m["files"].([]any)[0].(map[string]any)["sha256"] = strings.Repeat("0", 64)
			})
		}, "program-b1.mlir", "sha256"},
		"manifest path escape": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				m["files"].([]any)[0].(map[string]any)["name"] = "../../etc/passwd"
			})
		}, ManifestFile, "not a plain file name"},
		"manifest missing weights file": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) {
				files := m["files"].([]any)
				var kept []any
				for _, f := range files {
					if f.(map[string]any)["name"] != WeightsFile {
						kept = append(kept, f)
					}
				}
				m["files"] = kept
			})
		}, ManifestFile, `"weights.safetensors" is not listed`},
		"other format": {func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["format"] = "something-else" })
		}, ManifestFile, "format"},
		"no manifest": {func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ManifestFile))
		}, ManifestFile, "missing"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeTiny(t)
			c.tamper(t, dir)
			fe := readErr(t, dir)
			if fe.Path != filepath.Join(dir, c.file) {
				t.Errorf("error names %s, want %s (%v)", fe.Path, c.file, fe)
			}
			if !strings.Contains(fe.Error(), c.contains) {
				t.Errorf("error %q does not say %q", fe, c.contains)
			}
			if name == "future version" && !errors.Is(fe, ErrNewerFormat) {
				t.Errorf("a future version is not ErrNewerFormat: %v", fe)
			}
		})
	}
}

func TestSafetensorsHostile(t *testing.T) {
	good, err := encodeSafetensors(tinyBundle().Weights)
	if err != nil {
		t.Fatal(err)
	}
	if ws, err := decodeSafetensors(good); err != nil || len(ws) != 2 || ws[0].Name != "w" {
		t.Fatalf("decode: %v %v", ws, err)
	}
	hdr := func(h string, data int) []byte {
		out := make([]byte, 8, 8+len(h)+data)
		out[0] = byte(len(h))
		return append(append(out, h...), make([]byte, data)...)
	}
	cases := map[string][]byte{
		"short":        {1, 2, 3},
		"huge header":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"truncated":    good[:len(good)-4],
		"gap":          hdr(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, 3),
		"overlap":      hdr(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, 3),
		"size":         hdr(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4),
		"dtype":        hdr(`{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, 16),
		"negative dim": hdr(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0),
		"overflow":     hdr(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0),
		"extra field":  hdr(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}`, 1),
		"trailing":     hdr(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 2),
		// Zero bytes, so the file's checks pass, but past the bundle's element bound.
		"elements":  hdr(`{"a":{"dtype":"U8","shape":[1099511627777,0],"data_offsets":[0,0]}}`, 0),
		"duplicate": hdr(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2),
	}
	for name, data := range cases {
		if _, err := decodeSafetensors(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzReadManifest(f *testing.F) {
	_, files, err := tinyBundle().encode(true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(files[ManifestFile])
	if _, files, err = countingBundle(8).encode(true); err != nil { // a generator's entry too
		f.Fatal(err)
	}
	f.Add(files[ManifestFile])
	f.Add([]byte(`{"format":"nitro-exportbundle","format_version":1}`))
	f.Add([]byte(`{"format":"nitro-exportbundle","format_version":99}`))
	f.Add([]byte(`[]`))
	f.Add(deepJSON(200_000, true)) // refused by the depth scan, in milliseconds
	f.Add(deepJSON(200_000, false))
	f.Add(deepJSON(tensorfile.MaxJSONDepth+1, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// What is accepted survives a round trip.
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseManifest(again); err != nil {
			t.Fatalf("accepted, then refused after a round trip: %v", err)
		}
	})
}

// FuzzDecodeWeights: what the bundle's weights reader accepts is a valid Tensor (the codec's own
// fuzz target is tensorfile's FuzzDecodeSafetensors).
func FuzzDecodeWeights(f *testing.F) {
	good, _ := encodeSafetensors(tinyBundle().Weights)
	f.Add(good)
	zero := `{"a":{"dtype":"U8","shape":[1099511627777,0],"data_offsets":[0,0]}}`
	f.Add(append(binary.LittleEndian.AppendUint64(nil, uint64(len(zero))), zero...))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := decodeSafetensors(data)
		if err != nil {
			return
		}
		for _, w := range ws {
			if err := w.check(); err != nil {
				t.Fatalf("accepted %q: %v", w.Name, err)
			}
		}
	})
}

// TestManifestDuplicateKey: a key twice in manifest.json (weights_file, a TensorSpec's name) is refused
// naming it and where it is; encoding/json let the last one win.
func TestManifestDuplicateKey(t *testing.T) {
	_, files, err := tinyBundle().encode(true)
	if err != nil {
		t.Fatal(err)
	}
	good := files[ManifestFile]
	if _, err := ParseManifest(good); err != nil {
		t.Fatalf("the tiny bundle's manifest: %v", err)
	}
	twice := bytes.Replace(good, []byte(`{`), []byte(`{"weights_file":"other.safetensors",`), 1)
	_, err = ParseManifest(twice)
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `duplicate key "weights_file" in $`) {
		t.Fatalf("a manifest with weights_file twice: %v, want a FormatError naming the key", err)
	}
}
