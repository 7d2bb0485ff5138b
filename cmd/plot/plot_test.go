package plot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const fixture = "testdata/metrics.jsonl"

func readFixture(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// writeLines writes lines (joined by newlines, plus tail) to a file and returns its path.
func writeLines(t *testing.T, lines []string, tail string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+tail), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func hasWarning(run *Run, substr string) bool {
	return slices.ContainsFunc(run.Warnings, func(w string) bool { return strings.Contains(w, substr) })
}

func TestReadFixture(t *testing.T) {
	run, err := Read(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if run.Source != fixture || run.Lines != 69 || run.Status != "completed" {
		t.Errorf("Source %q, Lines %d, Status %q; want %q, 69, completed", run.Source, run.Lines, run.Status, fixture)
	}
	if got := sortedNames(run.Train); !reflect.DeepEqual(got, []string{"accuracy", "loss"}) {
		t.Errorf("train series %v", got)
	}
	loss := run.Train["loss"]
	if len(loss) != 60 || loss[0].X != 1 || loss[59].X != 60 {
		t.Fatalf("loss series: %d points, from %v", len(loss), loss)
	}
	for i, pt := range loss {
		if pt.X != float64(i+1) {
			t.Fatalf("loss point %d at step %v", i, pt.X)
		}
	}
	if first, last := loss[0].Y, loss[59].Y; !(first > 2 && last < 0.35) {
		t.Errorf("loss from %v to %v; the fixture's falls from above 2 to below 0.35", first, last)
	}
	wantVal := map[string][]Point{
		"val_accuracy": {{1, 0.8803}, {2, 0.9254}, {3, 0.9398}},
		"val_loss":     {{1, 0.4121}, {2, 0.2630}, {3, 0.2085}},
	}
	if !reflect.DeepEqual(run.Validate, wantVal) {
		t.Errorf("Validate = %v, want %v", run.Validate, wantVal)
	}
	wantData := map[string][]Point{"data_wait_frac": {{1, 0.0312}, {2, 0.0147}, {3, 0.0139}}}
	if !reflect.DeepEqual(run.Data, wantData) {
		t.Errorf("Data = %v, want %v", run.Data, wantData)
	}
	wantEnds := []EpochEnd{{1, 20}, {2, 40}, {3, 60}}
	if !reflect.DeepEqual(run.EpochEnds, wantEnds) {
		t.Errorf("EpochEnds = %v, want %v", run.EpochEnds, wantEnds)
	}
	// The fixture is what core logs today: no timing, so no steps/s, and a warning says so.
	if len(run.StepsPerSecond) != 0 || len(run.Warnings) != 1 || !hasWarning(run, "steps_per_second.png is left out") {
		t.Errorf("StepsPerSecond %v, Warnings %q", run.StepsPerSecond, run.Warnings)
	}
}

// checkPNG decodes a PNG, checks its size, and that more than 1% of its pixels are not white.
func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	img := readPNG(t, path)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
	if frac := inked(img); frac <= 0.01 {
		t.Errorf("%s: %.2f%% of pixels differ from the white background; want over 1%%", filepath.Base(path), 100*frac)
	}
}

// inked is the fraction of img's pixels that are not the background (white).
func inked(img image.Image) float64 {
	b := img.Bounds()
	bg := color.RGBA64Model.Convert(color.White)
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBA64Model.Convert(img.At(x, y)) != bg {
				n++
			}
		}
	}
	return float64(n) / float64(b.Dx()*b.Dy())
}

func TestWriteFixture(t *testing.T) {
	run, err := Read(fixture)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "plots", "nested") // Write creates it
	opts := Options{Width: 640, Height: 400}
	files, err := opts.Write(run, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if filepath.Dir(f) != dir {
			t.Errorf("%s is not in %s", f, dir)
		}
		names = append(names, filepath.Base(f))
	}
	want := []string{"train_loss.png", "train_accuracy.png", "val_accuracy.png", "val_loss.png", "data_wait_frac.png", "index.md"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	for _, f := range files[:len(files)-1] {
		checkPNG(t, f, opts.Width, opts.Height)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("%s holds %d entries (a temporary file left?), want %d", dir, len(entries), len(want))
	}
	index, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range want[:len(want)-1] {
		if !strings.Contains(string(index), "- ["+n+"]("+n+"): ") {
			t.Errorf("index.md does not list %s:\n%s", n, index)
		}
	}
	for _, s := range []string{
		"69 lines; 60 train steps logged (1 to 60); 3 epochs; finished `completed`.",
		"0.8803 to 0.9398 over epochs 1 to 3: 0.8803, 0.9254, 0.9398",
		"0.0139 to 0.0312 over epochs 1 to 3",
		"smoothed (thick: the centered mean of 5 points, fewer at the ends)",
		"## Warnings",
		"steps\\_per\\_second.png is left out",
	} {
		if !strings.Contains(string(index), s) {
			t.Errorf("index.md lacks %q:\n%s", s, index)
		}
	}
}

func TestWriteDefaultSizeAndRewrite(t *testing.T) {
	run, err := Parse(strings.NewReader(`{"type":"metrics","context":"train","epoch":1,"step":1,"loss":1.5}` + "\n" +
		`{"type":"metrics","context":"validate","epoch":1,"step":1,"val_loss":1.25}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for range 2 { // the second call renames over the first's files
		files, err := Write(run, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 3 {
			t.Fatalf("files %v, want train_loss.png, val_loss.png, index.md", files)
		}
		for _, f := range files[:2] {
			checkPNG(t, f, DefaultWidth, DefaultHeight) // one point each: still drawn
		}
	}
	if !hasWarning(run, "no finish line") {
		t.Errorf("no warning for the missing finish line: %q", run.Warnings)
	}
}

func TestStepsPerSecond(t *testing.T) {
	lines := readFixture(t)
	for i, l := range lines {
		// 20 steps per epoch in 4, 2 and 2.5 seconds; epoch 3 also says its rate outright.
		l = strings.Replace(l, `"data_wait_frac":0.0312`, `"data_wait_frac":0.0312,"epoch_seconds":4`, 1)
		l = strings.Replace(l, `"data_wait_frac":0.0147`, `"data_wait_frac":0.0147,"epoch_seconds":2`, 1)
		lines[i] = strings.Replace(l, `"data_wait_frac":0.0139`, `"data_wait_frac":0.0139,"epoch_seconds":2.5,"steps_per_second":7.5`, 1)
	}
	run, err := Read(writeLines(t, lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{{1, 5}, {2, 10}, {3, 7.5}}
	if !reflect.DeepEqual(run.StepsPerSecond, want) || len(run.Warnings) != 0 {
		t.Fatalf("StepsPerSecond = %v, want %v; warnings %q", run.StepsPerSecond, want, run.Warnings)
	}
	files, err := Options{Width: 320, Height: 240}.Write(run, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	want2 := []string{"train_loss.png", "train_accuracy.png", "val_accuracy.png", "val_loss.png", "steps_per_second.png", "data_wait_frac.png", "index.md"}
	if !reflect.DeepEqual(names, want2) {
		t.Fatalf("files %v, want %v", names, want2)
	}
	checkPNG(t, files[4], 320, 240)
}

func TestMalformedLine(t *testing.T) {
	good := `{"type":"metrics","context":"train","epoch":1,"step":1,"loss":2}`
	for name, bad := range map[string]string{
		"not JSON":          `loss=0.3`,
		"array":             `[1,2,3]`,
		"null":              `null`,
		"no type":           `{"context":"train","epoch":1,"step":2,"loss":1}`,
		"type not string":   `{"type":7}`,
		"no context":        `{"type":"metrics","epoch":1,"step":2,"loss":1}`,
		"no step":           `{"type":"metrics","context":"train","epoch":1,"loss":1}`,
		"step not integer":  `{"type":"metrics","context":"train","epoch":1,"step":2.5,"loss":1}`,
		"epoch string":      `{"type":"metrics","context":"train","epoch":"1","step":2,"loss":1}`,
		"negative step":     `{"type":"metrics","context":"train","epoch":1,"step":-2,"loss":1}`,
		"value string":      `{"type":"metrics","context":"train","epoch":1,"step":2,"loss":"low"}`,
		"value null":        `{"type":"metrics","context":"train","epoch":1,"step":2,"loss":null}`,
		"value overflows":   `{"type":"metrics","context":"train","epoch":1,"step":2,"loss":1e999}`,
		"finish status int": `{"type":"finish","status":1}`,
		"text after":        `{"type":"finish","status":"completed"} {"type":"x"}`,
		"key twice":         `{"type":"metrics","context":"train","epoch":1,"step":2,"loss":1,"loss":9}`,
		"too long":          `{"type":"other","key":"k","value":"` + strings.Repeat("x", MaxLineBytes) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			// The bad line is line 3, and not the last: a truncated-looking one would be tolerated
			// only as a crash's leftover, which these are not.
			_, err := Read(writeLines(t, []string{good, good, bad, good}, "\n"))
			var le *LineError
			if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v; want a *LineError at line 3 wrapping ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), "metrics.jsonl: line 3: malformed line") {
				t.Errorf("error %q does not name the file and line", err)
			}
		})
	}
}

func TestTruncatedLastLine(t *testing.T) {
	lines := readFixture(t)
	lines = lines[:len(lines)-1] // the crashed run wrote no finish line
	last := lines[len(lines)-1]
	// Every cut of a line, as a crash mid-write leaves it, is tolerated as the last line.
	for cut := 1; cut < len(last); cut++ {
		crashed := append(slices.Clone(lines[:len(lines)-1]), last[:cut])
		run, err := Parse(strings.NewReader(strings.Join(crashed, "\n")))
		if err != nil {
			t.Fatalf("cut at %d (%q): %v", cut, last[:cut], err)
		}
		if !hasWarning(run, "input: skipped 1 malformed line (first at line 68): cut short by a crash or a failed write; the last line is one") || !hasWarning(run, "no finish line") {
			t.Fatalf("cut at %d: warnings %q", cut, run.Warnings)
		}
		if run.Status != "" || len(run.Data["data_wait_frac"]) != 2 {
			t.Fatalf("cut at %d: status %q, data %v", cut, run.Status, run.Data)
		}
	}
	// A complete last line without its newline is simply read.
	run, err := Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil || len(run.Data["data_wait_frac"]) != 3 || hasWarning(run, "skipped") || run.Torn != 0 {
		t.Fatalf("complete last line: err %v, data %v, warnings %q", err, run.Data, run.Warnings)
	}
}

func TestTruncatedLineThenResume(t *testing.T) {
	// A crash cut line 3; the resumed run's logger started a new line (logjson does) and went on
	// from the last checkpoint, step 1, so step 2 is logged again.
	in := `{"type":"metrics","context":"train","epoch":1,"step":1,"loss":2}
{"type":"metrics","context":"train","epoch":1,"step":2,"loss":1.9}
{"type":"metrics","context":"train","epoch":1,"step":3,"lo
{"type":"params","seed":1}
{"type":"metrics","context":"train","epoch":1,"step":2,"loss":1.8}
{"type":"metrics","context":"train","epoch":1,"step":3,"loss":1.7}
{"type":"finish","status":"completed"}
`
	run, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{{1, 2}, {2, 1.8}, {3, 1.7}}
	if !reflect.DeepEqual(run.Train["loss"], want) {
		t.Errorf("loss = %v, want %v", run.Train["loss"], want)
	}
	if !hasWarning(run, "input: skipped 1 malformed line (first at line 3)") || !hasWarning(run, "1 train lines repeat") {
		t.Errorf("warnings %q", run.Warnings)
	}
	if !reflect.DeepEqual(run.EpochEnds, []EpochEnd{{1, 3}}) {
		t.Errorf("EpochEnds = %v", run.EpochEnds)
	}
}

func TestIgnoredLines(t *testing.T) {
	in := `{"type":"params","seed":1}

{"type":"tags","tags":["a"]}
{"type":"confusion","epoch":1,"matrix":[[1]]}
{"type":"something_new","data":{"x":[1,2]}}
{"type":"metrics","context":"test","epoch":1,"step":1,"test_loss":0.5}
{"type":"metrics","context":"train","epoch":1,"step":1,"loss":0.5}` + "\r\n" +
		`{"type":"finish","status":"completed"}` + "\n"
	run, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Train) != 1 || len(run.Validate) != 0 || len(run.Data) != 0 || run.Lines != 8 || run.Status != "completed" {
		t.Errorf("run = %+v", run)
	}
}

func TestEmptyFile(t *testing.T) {
	run, err := Read(writeLines(t, nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Write(run, t.TempDir())
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != IndexFile {
		t.Fatalf("files %v, err %v; want only the index", files, err)
	}
	index, _ := os.ReadFile(files[0])
	if !strings.Contains(string(index), "Nothing to plot.") || !strings.Contains(string(index), "the file is empty") {
		t.Errorf("index.md:\n%s", index)
	}
}

func TestReadMissingFile(t *testing.T) {
	if _, err := Read(filepath.Join(t.TempDir(), "none.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want one wrapping os.ErrNotExist", err)
	}
}

func TestHostileNames(t *testing.T) {
	in := `{"type":"metrics","context":"validate","epoch":1,"step":1,"../../escape":1,"a/b":2,"a_b":3,".hidden":4,"val_ok":5,"x\n# injected | [link](http://x)":6}` + "\n"
	run, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	files, err := Options{Width: 200, Height: 150}.Write(run, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if filepath.Dir(f) != dir {
			t.Errorf("%s escaped %s", f, dir)
		}
		names = append(names, filepath.Base(f))
	}
	want := []string{"val_.._.._escape.png", "val_.hidden.png", "val_a_b.png", "val_a_b_2.png", "val_ok.png", "val_x___injected____link__http___x_.png", "index.md"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	index, _ := os.ReadFile(files[len(files)-1])
	for _, l := range strings.Split(string(index), "\n") {
		if strings.HasPrefix(l, "# injected") {
			t.Errorf("a metric name started a Markdown line:\n%s", index)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	run := &Run{}
	for _, o := range []Options{{Width: -1, Height: 10}, {Width: 10}, {Width: 9000, Height: 10}, {Window: 4}, {Window: -1}} {
		if _, err := o.Write(run, t.TempDir()); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := Write(nil, t.TempDir()); err == nil {
		t.Error("a nil Run accepted")
	}
}

func TestCentered(t *testing.T) {
	pts := []Point{{1, 4}, {2, 2}, {3, 6}, {4, 0}, {5, 8}}
	got := centered(pts, 3)
	want := []Point{{1, 4}, {2, 4}, {3, 8.0 / 3}, {4, 14.0 / 3}, {5, 8}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("centered(3) = %v, want %v", got, want)
	}
	got = centered(pts, 5) // the middle point alone gets all five
	if got[2].Y != 4 || got[1].Y != 4 || got[0].Y != 4 {
		t.Errorf("centered(5) = %v", got)
	}
	// A spike neither overflows nor spoils the points after it.
	got = centered([]Point{{1, math.MaxFloat64}, {2, math.MaxFloat64}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}, 3)
	if math.Abs(got[1].Y/(math.MaxFloat64*(2.0/3))-1) > 1e-12 || math.Abs(got[4].Y-1) > 1e-12 {
		t.Errorf("centered with a spike = %v", got)
	}
}

func TestExtremeValues(t *testing.T) {
	// Finite, but at the ends of float64: Write must return (an error at worst), not crash.
	in := `{"type":"metrics","context":"train","epoch":1,"step":1,"loss":1.7e308}
{"type":"metrics","context":"train","epoch":1,"step":2,"loss":-1.7e308}
{"type":"metrics","context":"train","epoch":1,"step":3,"loss":5e-324}
{"type":"metrics","context":"validate","epoch":9223372036854775807,"step":3,"val_loss":1e-300}
`
	run, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Options{Width: 200, Height: 150}.Write(run, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || filepath.Base(files[0]) != "val_loss.png" {
		t.Fatalf("files %v, want val_loss.png and the index", files)
	}
	index, _ := os.ReadFile(files[1])
	if !strings.Contains(string(index), "train\\_loss.png is left out: its values span more than a float64 holds") {
		t.Errorf("index.md:\n%s", index)
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		integer bool
		lo, hi  float64
		want    []float64
	}{
		{true, 0.5, 3.5, []float64{1, 2, 3}},
		{true, 0.5, 40.5, []float64{5, 10, 15, 20, 25, 30, 35, 40}},
		{true, 0.5, 1.5, []float64{1}},
		{false, 0.18, 2.17, []float64{0.5, 1, 1.5, 2}},
		{false, -0.07, 0.03, []float64{-0.06, -0.04, -0.02, 0, 0.02}},
		{false, 2, 2, []float64{2}},
		{false, -math.MaxFloat64, math.MaxFloat64, nil}, // about -1e308, 0, 1e308
		{false, 1e18, 1e18 + 1000, nil},                 // checked for length only: the values are below float64's precision
	} {
		var got []float64
		for _, tk := range (ticks{integer: c.integer}).Ticks(c.lo, c.hi) {
			got = append(got, tk.Value)
		}
		if c.want == nil {
			if len(got) == 0 || len(got) > 21 {
				t.Errorf("ticks over %v..%v = %v", c.lo, c.hi, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ticks(integer %v) over %v..%v = %v, want %v", c.integer, c.lo, c.hi, got, c.want)
		}
	}
}

// Torn lines, as failed writes leave them (the logger starts its next line on a new one), are
// skipped and reported once for the file, with their count and the first one's line.
func TestTornLinesCountedOnce(t *testing.T) {
	lines := []string{
		`{"type":"params","seed":1}`,
		`{"type":"metrics","context":"train","epoch":1,"step":1,"loss":2}`,
		`{"type":"metrics","context":"train","epoch":1,"st`,
		`{"type":"metrics","context":"train","epoch":1,"step":2,"loss":1.9}`,
		`{"type":"metrics","context":"train","epoch":1,"step":3,"loss":1`,
		`{"type":"metrics","context":"train","epoch":1,"step":3,"loss":1.7}`,
		`{"type":"finish","status":"completed"}`,
	}
	run, err := Read(writeLines(t, lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if run.Torn != 2 || run.FirstTorn != 3 {
		t.Errorf("Torn %d, FirstTorn %d; want 2, 3", run.Torn, run.FirstTorn)
	}
	var about []string
	for _, w := range run.Warnings {
		if strings.Contains(w, "skipped") || strings.Contains(w, "cut short") {
			about = append(about, w)
		}
	}
	want := "metrics.jsonl: skipped 2 malformed lines (first at line 3): cut short by a crash or a failed write"
	if len(about) != 1 || about[0] != want {
		t.Errorf("warnings %q; want exactly one about the torn lines: %q", run.Warnings, want)
	}
	if got := run.Train["loss"]; len(got) != 3 {
		t.Errorf("loss = %v; want the 3 whole lines' points", got)
	}
}

// stepRunLines is a step-based run's record as core writes it: val_every 20 over 60 steps in
// epochs of 30, so validations 20 and 40 fall in different epochs and 40 and 60 share epoch 2.
// The data lines carry the period's timing (seconds, or the rate outright), tokens/s and MFU.
func stepRunLines() []string {
	lines := []string{`{"type":"params","ValEvery":20,"max_epochs":1,"max_steps":60,"val_every":20,"checkpoint_every":0}`}
	val := map[int]string{
		20: `{"type":"metrics","context":"validate","epoch":1,"step":20,"val_loss":3.8}` + "\n" +
			`{"type":"metrics","context":"data","epoch":1,"step":20,"data_wait_frac":0.01,"epoch_seconds":2,"tokens_per_second":20000,"mfu":0.075}`,
		40: `{"type":"metrics","context":"validate","epoch":2,"step":40,"val_loss":3.6}` + "\n" +
			`{"type":"metrics","context":"data","epoch":2,"step":40,"data_wait_frac":0.02,"steps_per_second":25,"tokens_per_second":70000,"mfu":0.3}`,
		60: `{"type":"metrics","context":"validate","epoch":2,"step":60,"val_loss":3.5}` + "\n" +
			`{"type":"metrics","context":"data","epoch":2,"step":60,"data_wait_frac":0.03,"epoch_seconds":4,"tokens_per_second":90000,"mfu":0.35}`,
	}
	for s := 1; s <= 60; s++ {
		lines = append(lines, fmt.Sprintf(`{"type":"metrics","context":"train","epoch":%d,"step":%d,"loss":%g}`, (s+29)/30, s, 5-float64(s)/30))
		if v, ok := val[s]; ok {
			lines = append(lines, strings.Split(v, "\n")...)
		}
	}
	return append(lines, `{"type":"finish","status":"completed"}`)
}

// A step-based run's validate and data lines are keyed by their step: one point per validation,
// none lost to the two that share an epoch, and no warning of a repeat; the epoch ends come from
// the train lines (a validation ends no epoch); the figures put them on a step axis spanning the
// train steps, with MFU in percent.
func TestStepBasedRun(t *testing.T) {
	run, err := Read(writeLines(t, stepRunLines(), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if run.ValEvery != 20 || len(run.Warnings) != 0 {
		t.Fatalf("ValEvery %d, warnings %q; want 20 and none", run.ValEvery, run.Warnings)
	}
	want := map[string][]Point{"val_loss": {{20, 3.8}, {40, 3.6}, {60, 3.5}}}
	if !reflect.DeepEqual(run.Validate, want) {
		t.Errorf("Validate = %v, want %v", run.Validate, want)
	}
	if got, want := run.Data["mfu"], []Point{{20, 0.075}, {40, 0.3}, {60, 0.35}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Data[mfu] = %v, want %v", got, want)
	}
	if got, want := run.Data["tokens_per_second"], []Point{{20, 20000}, {40, 70000}, {60, 90000}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Data[tokens_per_second] = %v, want %v", got, want)
	}
	if want := []EpochEnd{{1, 30}, {2, 60}}; !reflect.DeepEqual(run.EpochEnds, want) {
		t.Errorf("EpochEnds = %v, want %v", run.EpochEnds, want)
	}
	// 20 steps in 2 s; 25/s as logged; 20 steps (40 to 60) in 4 s.
	if want := []Point{{20, 10}, {40, 25}, {60, 5}}; !reflect.DeepEqual(run.StepsPerSecond, want) {
		t.Errorf("StepsPerSecond = %v, want %v", run.StepsPerSecond, want)
	}

	figs, skipped := Options{}.figures(run)
	byFile := map[string]figure{}
	for _, f := range figs {
		byFile[f.file] = f
	}
	for _, file := range []string{"val_loss.png", "steps_per_second.png", "data_mfu.png", "data_tokens_per_second.png", "data_wait_frac.png"} {
		f, ok := byFile[file]
		if !ok {
			t.Errorf("no %s among %d figures (skipped %q)", file, len(figs), skipped)
			continue
		}
		if x := f.plot.X; x.Label.Text != "optimizer step" || x.Min != 1 || x.Max != 60 {
			t.Errorf("%s: x axis %q over %v..%v, want the train figures' optimizer steps 1..60", file, x.Label.Text, x.Min, x.Max)
		}
	}
	for file, w := range map[string]string{
		"val_loss.png": "3.5 to 3.8 over steps 20 to 60: 3.8, 3.6, 3.5",
		"data_mfu.png": "7.5 to 35 over steps 20 to 60: 7.5, 30, 35",
	} {
		if got := byFile[file].values; got != w {
			t.Errorf("%s values %q, want %q", file, got, w)
		}
	}
	if about := byFile["val_loss.png"].about; !strings.Contains(about, "every 20 optimizer steps") || !strings.Contains(about, "dotted lines mark the epoch ends") {
		t.Errorf("val_loss.png about %q", about)
	}
	files, err := Options{Width: 320, Height: 240}.Write(run, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	checkPNG(t, files[slices.IndexFunc(files, func(f string) bool { return filepath.Base(f) == "val_loss.png" })], 320, 240)
	index, _ := os.ReadFile(files[len(files)-1])
	if !strings.Contains(string(index), "2 epochs, validated every 20 steps; finished `completed`.") {
		t.Errorf("index.md:\n%s", index)
	}
}

// A resumed step-based run logs a validation's step again: the repeat is counted by step, and
// the later line wins.
func TestStepBasedResumeRepeatsByStep(t *testing.T) {
	lines := stepRunLines()
	lines = append(lines[:len(lines)-1], // no finish: the run was killed after step 60's validation
		`{"type":"params","val_every":20}`,
		`{"type":"metrics","context":"train","epoch":2,"step":41,"loss":3}`,
		`{"type":"metrics","context":"validate","epoch":2,"step":60,"val_loss":3.4}`,
		`{"type":"finish","status":"completed"}`)
	run, err := Read(writeLines(t, lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !hasWarning(run, "1 validate lines repeat an earlier line's step (a resumed run?)") || hasWarning(run, "epoch (a resumed") {
		t.Errorf("warnings %q; want one validate repeat, by step", run.Warnings)
	}
	if want := []Point{{20, 3.8}, {40, 3.6}, {60, 3.4}}; !reflect.DeepEqual(run.Validate["val_loss"], want) {
		t.Errorf("val_loss = %v, want %v", run.Validate["val_loss"], want)
	}
}

// val_every must be a count of steps: anything else is refused naming the field.
func TestValEveryMalformed(t *testing.T) {
	for _, bad := range []string{`"20"`, `-1`, `2.5`, `null`} {
		_, err := Parse(strings.NewReader(`{"type":"params","val_every":` + bad + "}\n"))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `"val_every"`) {
			t.Errorf("val_every %s: err %v, want a malformed line naming val_every", bad, err)
		}
	}
}
