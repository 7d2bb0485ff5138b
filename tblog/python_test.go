package tblog

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/logjson"
)

// readBack is what testdata/read_events.py prints: what TensorBoard would show of a path.
type readBack struct {
	Files map[string]struct {
		Records     int    `json:"records"`
		FileVersion string `json:"file_version"`
	} `json:"files"`
	Scalars map[string][][2]float64 `json:"scalars"` // tag -> [step, value]
	Text    map[string][][2]any     `json:"text"`    // tag -> [step, text]
	Plugins map[string][]string     `json:"plugins"`
}

// tensorboardRead runs testdata/read_events.py on path with $NITRO_TENSORBOARD_PYTHON.
func tensorboardRead(t *testing.T, path string) readBack {
	t.Helper()
	py := prereq.TensorBoardPython.Interpreter(t, "NITRO_TENSORBOARD_PYTHON")
	out, err := exec.Command(py, "testdata/read_events.py", path).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		prereq.TensorBoardPython.Broken(t, string(stderr)+err.Error())
	}
	var rb readBack
	if err := json.Unmarshal(out, &rb); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return rb
}

// TestPythonRun writes a run of two epochs, resumed once into a second file, and reads it
// with TensorBoard's reader: every scalar at every step, equal as float32, and every text.
// Run alone: NITRO_TENSORBOARD_PYTHON=$PWD/.nitro/tb-venv/bin/python go test -run Python ./tblog/
func TestPythonRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), DirName)
	want := map[string][][2]float64{}
	log := func(w *Writer, step, epoch int, context string, values map[string]float64) {
		t.Helper()
		must(t, w.LogMetrics(logjson.Metrics{Step: step, Epoch: epoch, Context: context, Values: values}))
		prefix := map[string]string{"train": "train/", "validate": "val/", "data": "data/"}[context]
		for k, v := range values {
			want[prefix+k] = append(want[prefix+k], [2]float64{float64(step), float64(float32(v))})
		}
	}
	// Values a float32 rounds (0.1, 1/3), tiny, huge (still within float32's range once
	// doubled) and negative ones.
	odd := []float64{0.1, 1.0 / 3, 1e-30, 1.7e38, -2.5, 0}
	w := New(dir)
	must(t, w.LogParams(map[string]any{"learning_rate": 0.05, "preset": "tiny", "opt": map[string]any{"beta": 0.9}}))
	must(t, w.LogOther("config_report", "width  128\nseed   42"))
	step := 0
	for epoch := 1; epoch <= 2; epoch++ {
		for range 6 {
			step++
			log(w, step, epoch, "train", map[string]float64{"loss": odd[step%len(odd)] * float64(epoch), "steps_per_second": 100 + float64(step)/7})
		}
		log(w, step, epoch, "validate", map[string]float64{"val_loss": 1 / float64(epoch*3), "val_accuracy": 0.5 + float64(epoch)/10})
		log(w, step, epoch, "data", map[string]float64{"data_wait_frac": 0.001 * float64(epoch), "epoch_seconds": 2.25})
	}
	must(t, w.Finish(logjson.StatusRequested))
	// A resumed run: a new Writer on the same folder adds a file and goes on from the step.
	r := New(dir)
	r.now = func() time.Time { return time.Now().Add(time.Second) } // a name after the first file's
	for range 3 {
		step++
		log(r, step, 3, "train", map[string]float64{"loss": 0.01 * float64(step), "steps_per_second": 120})
	}
	log(r, step, 3, "validate", map[string]float64{"val_loss": 0.2, "val_accuracy": 0.875})
	must(t, r.Finish(logjson.StatusCompleted))

	rb := tensorboardRead(t, dir)
	if len(rb.Files) != 2 {
		t.Fatalf("TensorBoard saw files %v, want 2", rb.Files)
	}
	for name, f := range rb.Files {
		if f.FileVersion != FileVersion {
			t.Errorf("%s: file_version %q", name, f.FileVersion)
		}
	}
	if rb.Files[filepath.Base(w.Path())].Records != w.Records() || rb.Files[filepath.Base(r.Path())].Records != r.Records() {
		t.Errorf("records read %v, written %d and %d", rb.Files, w.Records(), r.Records())
	}
	if !reflect.DeepEqual(rb.Scalars, want) {
		t.Errorf("TensorBoard's scalars:\n%v\nwant:\n%v", rb.Scalars, want)
	}
	wantText := map[string][][2]any{
		TagParams:       {{0.0, "| param | value |\n| --- | --- |\n| learning_rate | 0.05 |\n| opt.beta | 0.9 |\n| preset | tiny |\n"}},
		"config_report": {{0.0, "```\nwidth  128\nseed   42\n```"}},
		TagStatus:       {{12.0, "requested"}, {15.0, "completed"}},
	}
	if !reflect.DeepEqual(rb.Text, wantText) {
		t.Errorf("TensorBoard's texts:\n%q\nwant:\n%q", rb.Text, wantText)
	}
}

// TestPythonGolden reads the golden file with TensorBoard's reader: what TestGolden pins byte
// for byte is what TensorBoard reads.
func TestPythonGolden(t *testing.T) {
	rb := tensorboardRead(t, goldenFile)
	want := readBack{
		Scalars: map[string][][2]float64{"train/loss": {{7, float64(float32(0.1))}}, "val/val_accuracy": {{7, float64(float32(-2.5e-7))}}},
		Text:    map[string][][2]any{TagParams: {{7.0, "| param | value |\n| --- | --- |\n| seed | 42 |\n"}}},
		Plugins: map[string][]string{"scalars": {"train/loss", "val/val_accuracy"}, "text": {TagParams}},
	}
	if f := rb.Files[filepath.Base(goldenFile)]; f.Records != 3 || f.FileVersion != FileVersion {
		t.Errorf("golden file read as %+v", rb.Files)
	}
	if !reflect.DeepEqual(rb.Scalars, want.Scalars) || !reflect.DeepEqual(rb.Text, want.Text) || !reflect.DeepEqual(rb.Plugins, want.Plugins) {
		t.Errorf("golden file read as %+v, want %+v", rb, want)
	}
}
