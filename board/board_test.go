package board_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/board"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func trainLine(step int, loss float64) string {
	return fmt.Sprintf(`{"type":"metrics","context":"train","epoch":1,"step":%d,"loss":%g}`+"\n", step, loss)
}

func serve(t *testing.T, cfg board.Config) *httptest.Server {
	t.Helper()
	b, err := board.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

func runs(t *testing.T, srv *httptest.Server) []board.Run {
	t.Helper()
	var out struct{ Runs []board.Run }
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/api/runs")), &out); err != nil {
		t.Fatal(err)
	}
	return out.Runs
}

// TestCutLastLine: a line without its newline (a write in progress, or a crash) is not parsed
// until the newline arrives, and the page says it waits; then it counts as the point it is.
func TestCutLastLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, board.MetricsFile)
	full := trainLine(3, 0.5)
	writeFile(t, path, `{"type":"params","lr":0.1}`+"\n"+trainLine(1, 2)+trainLine(2, 1)+full[:20])
	srv := serve(t, board.Config{Runs: []string{dir}})
	r := runs(t, srv)[0]
	if n := len(r.Train["loss"]); n != 2 || r.Malformed != 0 || r.Pending != 20 || r.Phase != "training epoch 1" {
		t.Fatalf("with a cut last line: %d loss points, %d malformed, %d pending, phase %q; want 2, 0, 20, training epoch 1", n, r.Malformed, r.Pending, r.Phase)
	}
	if page := get(t, srv.URL+"/"); !strings.Contains(page, "the last line is incomplete (20 bytes)") {
		t.Errorf("the page does not say the last line waits:\n%s", page)
	}
	appendFile(t, path, full[20:])
	r = runs(t, srv)[0]
	if n := len(r.Train["loss"]); n != 3 || r.Malformed != 0 || r.Pending != 0 || r.Train["loss"][2] != (board.Point{X: 3, Y: 0.5, Step: 3, Epoch: 1}) {
		t.Fatalf("after the newline arrived: %v, %d malformed, %d pending", r.Train["loss"], r.Malformed, r.Pending)
	}
}

// TestMalformedLines: lines that are not the logger's JSON are counted and their reasons shown,
// and the good lines around them still count.
func TestMalformedLines(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, board.MetricsFile), trainLine(1, 2)+"not json\n"+
		`{"type":"metrics","context":"train","epoch":1,"step":2,"loss":"high"}`+"\n"+`{"no":"type"}`+"\n"+trainLine(3, 1)+
		`{"type":"metrics","context":"train","epoch":1,"step":4,"loss":1,"loss":9}`+"\n"+
		`{"type":"finish","status":"completed"}`+"\n")
	srv := serve(t, board.Config{Runs: []string{dir}})
	r := runs(t, srv)[0]
	if r.Malformed != 4 || len(r.Train["loss"]) != 2 || r.StopReason != "completed" || r.Phase != "finished" {
		t.Fatalf("malformed %d (want 4), loss points %d (want 2), stop %q, phase %q", r.Malformed, len(r.Train["loss"]), r.StopReason, r.Phase)
	}
	page := get(t, srv.URL+"/")
	for _, w := range []string{"line 2 is not a JSON object", `line 3: metric &#34;loss&#34; is not a number`, `line 4 has no string &#34;type&#34;`, `line 6: duplicate key &#34;loss&#34; in $`, `<td class="malformed">4</td>`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}

// TestTornLinesSaidOnce: torn lines (a failed write's prefix, the logger's next line starting on
// a new one) are skipped, and the run says so in one sentence for the file: the count and the
// first one's line, however many there are.
func TestTornLinesSaidOnce(t *testing.T) {
	dir := t.TempDir()
	torn := trainLine(9, 0.25)[:30] + "\n"
	writeFile(t, filepath.Join(dir, board.MetricsFile), `{"type":"params","lr":0.1}`+"\n"+trainLine(1, 2)+torn+trainLine(2, 1)+torn+torn+trainLine(3, 0.5))
	srv := serve(t, board.Config{Runs: []string{dir}})
	r := runs(t, srv)[0]
	if r.Malformed != 3 || len(r.Train["loss"]) != 3 {
		t.Fatalf("malformed %d (want 3), loss points %d (want 3)", r.Malformed, len(r.Train["loss"]))
	}
	want := board.MetricsFile + ": skipped 3 malformed lines (first at line 3)"
	said := 0
	for _, w := range r.Warnings {
		if strings.Contains(w, "skipped") {
			said++
			if w != want {
				t.Errorf("warning %q; want %q", w, want)
			}
		}
	}
	if said != 1 {
		t.Errorf("warnings %q: want the skipped lines said exactly once", r.Warnings)
	}
	if page := get(t, srv.URL+"/"); strings.Count(page, want) != 1 {
		t.Errorf("the page says %q %d times; want once", want, strings.Count(page, want))
	}
}

// TestHugeFile: a file far larger than what the board keeps is read in ReadBudget slices from
// the last offset, every series is decimated to MaxPoints evenly over the run (first and last
// steps kept), and what the board retains stays small.
func TestHugeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, board.MetricsFile)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 200_000
	for s := 1; s <= steps; s++ {
		fmt.Fprintf(f, `{"type":"metrics","context":"train","epoch":1,"step":%d,"loss":%g,"accuracy":0.5,"step_seconds":0.012345678901234,"steps_per_second":81.00000737}`+"\n", s, 1/float64(s))
	}
	f.Close()
	fi, _ := os.Stat(path)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := board.New(board.Config{Runs: []string{dir}, MaxPoints: 300, ReadBudget: fi.Size() / 3})
	if err != nil {
		t.Fatal(err)
	}
	r := b.Snapshot()[0]
	if r.Behind == 0 || r.Behind >= fi.Size() || !strings.Contains(strings.Join(r.Warnings, ";"), "still reading") {
		t.Fatalf("the first refresh should read one budget of the %d bytes: %d unread, warnings %v", fi.Size(), r.Behind, r.Warnings)
	}
	for i := 0; i < 3; i++ {
		r = b.Snapshot()[0]
	}
	if r.Behind != 0 || r.Lines != steps || r.Malformed != 0 {
		t.Fatalf("after catching up: %d unread, %d lines (want %d), %d malformed", r.Behind, r.Lines, steps, r.Malformed)
	}
	loss := r.Train["loss"]
	if len(loss) > 301 || len(loss) < 100 || loss[0].X != 1 || loss[len(loss)-1].X != steps {
		t.Fatalf("decimated loss: %d points from step %v to %v; want 100..301 from 1 to %d", len(loss), loss[0].X, loss[len(loss)-1].X, steps)
	}
	mid := loss[len(loss)/2].X
	if mid < steps/4 || mid > 3*steps/4 {
		t.Errorf("the kept points are not spread over the run: the middle one is step %v of %d", mid, steps)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Errorf("the board retains %d bytes after reading a %d-byte file; want under 4 MiB", grew, fi.Size())
	}
	runtime.KeepAlive(b)
}

// TestRunDirGone: a run directory removed while the board serves it is shown as gone, with what
// was read before, and the other runs are still served.
func TestRunDirGone(t *testing.T) {
	root := t.TempDir()
	a, c := filepath.Join(root, "a"), filepath.Join(root, "c")
	for _, d := range []string{a, c} {
		os.Mkdir(d, 0o755)
		writeFile(t, filepath.Join(d, board.MetricsFile), trainLine(1, 2)+trainLine(2, 1))
	}
	later := filepath.Join(root, "later")
	srv := serve(t, board.Config{Runs: []string{a, c, later}})
	if r := runs(t, srv); r[0].Phase != "training epoch 1" || r[2].Gone || r[2].Phase != "waiting (no run directory yet)" {
		t.Fatalf("phases %q, %q (gone %v)", r[0].Phase, r[2].Phase, r[2].Gone)
	}
	os.Mkdir(later, 0o755)
	if r := runs(t, srv); r[2].Phase != "waiting (no metrics.jsonl yet)" {
		t.Fatalf("a run directory created after the board started: phase %q", r[2].Phase)
	}
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	r := runs(t, srv)
	if !r[0].Gone || r[0].Phase != "gone" || len(r[0].Train["loss"]) != 2 || r[1].Gone || len(r[1].Train["loss"]) != 2 || r[2].Gone {
		t.Fatalf("after removing %s: %+v", a, r)
	}
	page := get(t, srv.URL+"/")
	if !strings.Contains(page, `<tr class="run gone" data-run="a">`) || !strings.Contains(page, "the run directory is gone") {
		t.Errorf("the page does not show run a as gone:\n%s", page)
	}
}

// TestConfigDiff: the fields that differ between runs are listed (a field one run lacks
// differs), those that agree counted, run_dir left out.
func TestConfigDiff(t *testing.T) {
	root := t.TempDir()
	for i, p := range []string{`"lr":0.1,"seed":1,"width":64`, `"lr":0.01,"seed":1`} {
		d := filepath.Join(root, fmt.Sprint("r", i))
		os.Mkdir(d, 0o755)
		writeFile(t, filepath.Join(d, board.MetricsFile), `{"type":"params",`+p+`,"run_dir":"`+d+`"}`+"\n")
	}
	srv := serve(t, board.Config{Runs: []string{filepath.Join(root, "r0"), filepath.Join(root, "r1")}})
	page := get(t, srv.URL+"/")
	for _, w := range []string{`<span id="differ">2</span> fields differ, 1 agree`, `data-field="lr"><td>lr</td><td>0.1</td><td>0.01</td>`, `data-field="width"><td>width</td><td>64</td><td>—</td>`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if strings.Contains(page, `data-field="run_dir"`) || strings.Contains(page, `data-field="seed"`) {
		t.Errorf("run_dir and agreeing fields are not diff rows")
	}
}

// TestConfigOneRowPerKnob: a knob logged under two spellings (core's resolved max_epochs beside
// the experiment's MaxEpochs field, which a --max-epochs overrode) is one row showing the value
// the run used, the other value noted; a run that logged only the field shares that row.
func TestConfigOneRowPerKnob(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for i, p := range []string{`"MaxEpochs":2,"max_epochs":1,"LearningRate":0.1,"learning_rate":0.1,"Hidden":64`,
		`"MaxEpochs":2,"max_epochs":2,"LearningRate":0.01,"learning_rate":0.01,"Hidden":64`, `"MaxEpochs":3,"LearningRate":0.1,"Hidden":64`} {
		d := filepath.Join(root, fmt.Sprint("r", i))
		os.Mkdir(d, 0o755)
		writeFile(t, filepath.Join(d, board.MetricsFile), `{"type":"params",`+p+`}`+"\n")
		dirs = append(dirs, d)
	}
	srv := serve(t, board.Config{Runs: dirs})
	page := get(t, srv.URL+"/")
	for _, w := range []string{`<span id="differ">2</span> fields differ, 1 agree`,
		`data-field="max_epochs"><td>max_epochs</td><td title="the run used this; also logged: MaxEpochs 2">1</td><td>2</td><td>3</td>`,
		`data-field="learning_rate"><td>learning_rate</td><td>0.1</td><td>0.01</td><td>0.1</td>`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if strings.Contains(page, `data-field="MaxEpochs"`) || strings.Contains(page, `data-field="LearningRate"`) {
		t.Errorf("a knob's struct-field spelling has a row of its own beside its snake_case one")
	}
	if r := runs(t, srv)[0]; r.Params["max_epochs"] != "1" || r.Overridden["max_epochs"] != "MaxEpochs 2" || len(r.Params) != 3 {
		t.Errorf("run r0's params %v, overridden %v; want max_epochs 1 kept, MaxEpochs 2 noted", r.Params, r.Overridden)
	}
}

// TestReplacedFileAndResume: a file that shrank is read again from the start; a resumed run's
// repeated steps replace the earlier points from that step on.
func TestReplacedFileAndResume(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, board.MetricsFile)
	writeFile(t, path, trainLine(1, 4)+trainLine(2, 3)+trainLine(3, 2)+trainLine(4, 1))
	srv := serve(t, board.Config{Runs: []string{dir}})
	runs(t, srv)
	appendFile(t, path, trainLine(3, 9)) // resumed from step 2's checkpoint
	if got := runs(t, srv)[0].Train["loss"]; len(got) != 3 || got[2] != (board.Point{X: 3, Y: 9, Step: 3, Epoch: 1}) {
		t.Fatalf("after the resumed run repeated step 3: %v", got)
	}
	writeFile(t, path, trainLine(1, 7))
	if got := runs(t, srv)[0].Train["loss"]; len(got) != 1 || got[0].Y != 7 {
		t.Fatalf("after the file was replaced by a shorter one: %v", got)
	}
}

// TestBestCheckpoint: the manifest's best entry by its metric's mode: the lowest loss, the
// highest accuracy.
func TestBestCheckpoint(t *testing.T) {
	for _, c := range []struct{ metric, want string }{{"val_loss", "b.safetensors (val_loss 0.1"}, {"val_accuracy", "a.safetensors (val_accuracy 0.9"}} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "manifest.json"), fmt.Sprintf(`{"version":1,"checkpoints":[`+
			`{"file":"a.safetensors","epoch":1,"step":5,"metric":%[1]q,"score":0.9},`+
			`{"file":"b.safetensors","epoch":2,"step":10,"metric":%[1]q,"score":0.1},`+
			`{"file":"c.safetensors","epoch":3,"step":15,"metric":%[1]q,"score":0.5,"stop_reason":"completed"}]}`, c.metric))
		srv := serve(t, board.Config{Runs: []string{dir}})
		if got := runs(t, srv)[0].Best; !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: best %q, want %q...", c.metric, got, c.want)
		}
	}
}

// TestPageAndAssets: the page links its embedded stylesheet and script, which are served, and
// draws one polyline per run per metric with its point count; a bad Config names the field.
func TestPageAndAssets(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, board.MetricsFile), trainLine(1, 2)+trainLine(2, 1)+
		`{"type":"metrics","context":"validate","epoch":1,"step":2,"val_loss":1.5}`+"\n")
	srv := serve(t, board.Config{Runs: []string{dir}})
	page := get(t, srv.URL+"/")
	name := filepath.Base(dir)
	for _, w := range []string{`<script src="/assets/board.js">`, `data-context="train" data-metric="loss"`,
		`<polyline class="series" data-run="` + name + `" data-points="2"`, `data-context="validate" data-metric="val_loss"`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if js := get(t, srv.URL+"/assets/board.js"); !strings.Contains(js, `fetch("/content?"`) {
		t.Errorf("board.js: %q", js)
	}
	if css := get(t, srv.URL+"/assets/style.css"); !strings.Contains(css, ".series") {
		t.Errorf("style.css: %q", css)
	}
	if content := get(t, srv.URL+"/content"); strings.Contains(content, "<html") || !strings.Contains(content, "<polyline") {
		t.Errorf("/content should be the body only")
	}
	for _, c := range []struct {
		cfg  board.Config
		want string
	}{{board.Config{}, "no run directories"}, {board.Config{Runs: []string{dir}, MaxPoints: 1}, "MaxPoints 1"},
		{board.Config{Runs: []string{dir}, ReadBudget: -1}, "ReadBudget -1"}} {
		if _, err := board.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestConcurrentRequests: requests from several clients while the file grows are served
// (run with -race: the refreshes serialize).
func TestConcurrentRequests(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, board.MetricsFile)
	writeFile(t, path, trainLine(1, 1))
	srv := serve(t, board.Config{Runs: []string{dir}})
	done := make(chan error)
	for i := 0; i < 4; i++ {
		go func() {
			var err error
			for j := 0; j < 20 && err == nil; j++ {
				var resp *http.Response
				if resp, err = http.Get(srv.URL + []string{"/", "/content", "/api/runs"}[j%3]); err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			done <- err
		}()
	}
	for s := 2; s <= 50; s++ {
		appendFile(t, path, trainLine(s, 1/float64(s)))
	}
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if n := len(runs(t, srv)[0].Train["loss"]); n != 50 {
		t.Errorf("%d loss points, want 50", n)
	}
}

// TestLoopbackHostOnly: with LoopbackHostOnly a request naming another host (a DNS name rebound to
// 127.0.0.1) is refused; localhost and loopback addresses are served.
func TestLoopbackHostOnly(t *testing.T) {
	dir := t.TempDir()
	srv := serve(t, board.Config{Runs: []string{dir}, LoopbackHostOnly: true})
	for host, want := range map[string]int{"evil.example:6006": http.StatusForbidden, "localhost:6006": http.StatusOK,
		"127.0.0.1:6006": http.StatusOK, "[::1]:6006": http.StatusOK, "10.0.0.1": http.StatusForbidden} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/runs", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %s, want %d", host, resp.Status, want)
		}
	}
}

// TestStepsPerSecond: the shown rate is one over the median step time of the newest train
// lines, so the first step's compile does not drag it down.
func TestStepsPerSecond(t *testing.T) {
	dir := t.TempDir()
	var lines strings.Builder
	for s := 1; s <= 9; s++ {
		secs := 0.01
		if s == 1 {
			secs = 2.5 // the compile
		}
		fmt.Fprintf(&lines, `{"type":"metrics","context":"train","epoch":1,"step":%d,"loss":1,"step_seconds":%g}`+"\n", s, secs)
	}
	writeFile(t, filepath.Join(dir, board.MetricsFile), lines.String())
	if got := runs(t, serve(t, board.Config{Runs: []string{dir}}))[0].StepsPerSecond; got < 99 || got > 101 {
		t.Errorf("steps/s %v, want 100", got)
	}
}

// TestFIFOFilesDoNotHang: a run dir whose metrics.jsonl and manifest.json are named pipes with no
// writer is answered at once, the record's pipe named as unreadable (a plain open waited for a
// writer, so every request hung).
func TestFIFOFilesDoNotHang(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{board.MetricsFile, "manifest.json"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, board.Config{Runs: []string{dir}})
	done := make(chan error, 1)
	go func() { // the request may hang: it must not call t.Fatal off the test's goroutine
		resp, err := http.Get(srv.URL + "/api/runs")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("/api/runs on a run dir of named pipes is still waiting after 20 s")
	}
	if page := get(t, srv.URL+"/"); !strings.Contains(page, "cannot read "+board.MetricsFile) || !strings.Contains(page, "not a regular file") {
		t.Errorf("the page does not say the record is not a regular file:\n%.2000s", page)
	}
	if best := runs(t, srv)[0].Best; !strings.Contains(best, "not a regular file") {
		t.Errorf("best checkpoint %q, want the manifest named unreadable", best)
	}
}

func validateLine(epoch, step int, kv string) string {
	return fmt.Sprintf(`{"type":"metrics","context":"validate","epoch":%d,"step":%d,%s}`+"\n", epoch, step, kv)
}

// chartOf is the SVG of the chart of ctx and metric in page, and its figure's legend.
func chartOf(t *testing.T, page, ctx, metric string) string {
	t.Helper()
	i := strings.Index(page, `data-context="`+ctx+`" data-metric="`+metric+`"`)
	if i < 0 {
		t.Fatalf("no %s chart of %s in the page:\n%s", ctx, metric, page)
	}
	return page[i : i+strings.Index(page[i:], "</figure>")]
}

// TestFamilyChart: metrics that differ only in a numeric suffix (a confusion matrix's per-class
// accuracies) are one chart, a curve per member and run, with a legend naming the members and
// the runs; the unsuffixed metric and a lone suffixed one keep charts of their own.
func TestFamilyChart(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for _, name := range []string{"a", "b"} {
		d := filepath.Join(root, name)
		os.Mkdir(d, 0o755)
		writeFile(t, filepath.Join(d, board.MetricsFile), validateLine(1, 5, `"val_accuracy":0.5,"val_accuracy_0":0.9,"val_accuracy_1":0.4,"val_accuracy_10":0.2,"val_layer_3":1`)+
			validateLine(2, 10, `"val_accuracy":0.6,"val_accuracy_0":0.95,"val_accuracy_1":0.5,"val_accuracy_10":0.3,"val_layer_3":2`))
		dirs = append(dirs, d)
	}
	page := get(t, serve(t, board.Config{Runs: dirs}).URL+"/")
	fam := chartOf(t, page, "validate", "val_accuracy_*")
	if n := strings.Count(fam, `<polyline class="series"`); n != 6 {
		t.Errorf("the family chart draws %d curves, want 3 members x 2 runs:\n%s", n, fam)
	}
	for _, w := range []string{`>val_accuracy_* (3)</text>`, `data-run="b" data-points="2" data-member="val_accuracy_10" stroke-dasharray="6 3"`,
		`<figcaption class="legend">`, `data-member="val_accuracy_0"><span class="swatch"`, `data-legend-run="a"`, `data-legend-run="b"`} {
		if !strings.Contains(fam, w) {
			t.Errorf("the family chart lacks %q:\n%s", w, fam)
		}
	}
	if i, j := strings.Index(fam, `data-member="val_accuracy_1"`), strings.Index(fam, `data-member="val_accuracy_10"`); i < 0 || j < i {
		t.Errorf("the family's members are not in suffix order")
	}
	if strings.Contains(page, `data-metric="val_accuracy_1"`) || strings.Count(page, `class="chart"`) != 3 {
		t.Errorf("want 3 charts (the family, val_accuracy, val_layer_3), got %d", strings.Count(page, `class="chart"`))
	}
	chartOf(t, page, "validate", "val_accuracy")
	if lone := chartOf(t, page, "validate", "val_layer_3"); strings.Contains(lone, "legend") {
		t.Errorf("a lone suffixed metric is a plain chart:\n%s", lone)
	}
}

// TestViewControls: the query picks the x axis (epoch: a train point at its step over the steps
// per epoch; time: the sum of step_seconds), the smoothing (a smoothed curve over the faint raw
// one) and the runs hidden (not drawn, still listed, their toggle off); a bad value is refused
// naming the parameter.
func TestViewControls(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		os.Mkdir(d, 0o755)
		var lines strings.Builder
		for s := 1; s <= 8; s++ {
			fmt.Fprintf(&lines, `{"type":"metrics","context":"train","epoch":%d,"step":%d,"loss":%d,"step_seconds":0.25}`+"\n", (s+3)/4, s, 10-s)
			if s%4 == 0 {
				lines.WriteString(validateLine(s/4, s, `"val_loss":1`))
			}
		}
		writeFile(t, filepath.Join(d, board.MetricsFile), lines.String())
	}
	srv := serve(t, board.Config{Runs: []string{a, b}})
	loss := func(query string) string { return chartOf(t, get(t, srv.URL+"/content?"+query), "train", "loss") }
	if c := loss("x=epoch"); !strings.Contains(c, `>epoch</text>`) || !strings.Contains(c, `>1.5</text>`) || strings.Contains(c, `>6</text><text class="axis"`) {
		t.Errorf("on the epoch axis the train points should span epochs 0.25 to 2:\n%s", c)
	}
	if c := loss("x=time"); !strings.Contains(c, `>train time (s): the sum of step_seconds</text>`) || !strings.Contains(c, `>1.5</text>`) {
		t.Errorf("on the time axis the train points should span 0.25 to 2 s:\n%s", c)
	}
	c := loss("smooth=0.6&hide=b")
	for _, w := range []string{`<polyline class="series raw" data-run="a" data-points="8"`, `<polyline class="series smoothed" data-run="a" data-points="8"`, "; smoothed 0.6<"} {
		if !strings.Contains(c, w) {
			t.Errorf("smoothed, b hidden: the chart lacks %q:\n%s", w, c)
		}
	}
	if strings.Contains(c, `data-run="b"`) {
		t.Errorf("a hidden run is drawn:\n%s", c)
	}
	content := get(t, srv.URL+"/content?hide=b")
	if !strings.Contains(content, `<tr class="run hidden" data-run="b"><td><input type="checkbox" class="toggle" value="b" title="draw this run"><span`) ||
		!strings.Contains(content, `value="a" title="draw this run" checked>`) {
		t.Errorf("the runs table should list b, its toggle off, and a's on:\n%s", content)
	}
	if page := get(t, srv.URL+"/?x=time&smooth=0.3"); !strings.Contains(page, `<option value="time" title="train time (s): the sum of step_seconds" selected>train time</option>`) || !strings.Contains(page, `value="0.3"><output>0.3</output>`) {
		t.Errorf("the page's controls should show the view asked for")
	}
	for query, want := range map[string]string{"x=wall": `x="wall": the x axis is auto, step, epoch or time`, "smooth=1": `smooth="1": the smoothing weight is a number from 0 (none) to 0.99`} {
		resp, err := http.Get(srv.URL + "/content?" + query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("%s: %s %q, want 400 and %q", query, resp.Status, body, want)
		}
	}
}

// TestWatchFindsNewRuns: a watched folder stands for the runs in it (up to three levels down, not
// inside a run), found again at every refresh: a run started later appears, one past MaxRuns is
// named on the page, not followed; a watched folder with no run yet says so.
func TestWatchFindsNewRuns(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		dir := filepath.Join(root, rel)
		os.MkdirAll(dir, 0o755)
		writeFile(t, filepath.Join(dir, board.MetricsFile), trainLine(1, 1))
		return dir
	}
	mlp := mk("runs/MLP")
	mk("runs/MLP/old/inner") // inside a run: not a run of its own
	cnn := mk("runs/sweep/CNN/lr-0.1")
	mk("runs/a/b/c/too-deep")
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	srv := serve(t, board.Config{Watch: []string{filepath.Join(root, "runs"), empty}, MaxRuns: 3})
	names := func() []string {
		var out []string
		for _, r := range runs(t, srv) {
			out = append(out, r.Dir)
		}
		return out
	}
	if got := names(); strings.Join(got, " ") != mlp+" "+cnn {
		t.Fatalf("runs %v, want %s and %s", got, mlp, cnn)
	}
	if page := get(t, srv.URL+"/"); !strings.Contains(page, empty+" holds no run yet") {
		t.Errorf("the page should say the empty watched folder holds no run yet")
	}
	late := mk("runs/late")
	if got := names(); len(got) != 3 || got[2] != late {
		t.Fatalf("after a run started under the watched folder: %v, want %s last", got, late)
	}
	later := mk("runs/later")
	mk("runs/latest")
	page := get(t, srv.URL+"/")
	if got := names(); len(got) != 3 || !strings.Contains(page, "2 more runs found are not shown ("+later) ||
		!strings.Contains(page, "the board follows at most MaxRuns 3 runs") {
		t.Errorf("past MaxRuns: runs %v; the page should name the runs not followed and the bound", got)
	}
	if _, err := board.New(board.Config{Runs: []string{mlp, cnn}, MaxRuns: 1}); err == nil || !strings.Contains(err.Error(), "Config.MaxRuns 1: fewer than the 2 runs given") {
		t.Errorf("MaxRuns below the runs given: %v", err)
	}
}

// stepRun writes a step-based run's record into dir, as core logs it: val_every 20 over 60
// steps in epochs of 30, so validations 20 and 40 fall in different epochs and 40 and 60 share
// epoch 2; its data lines carry tokens/s and MFU.
func stepRun(t *testing.T, dir string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"params","ValEvery":20,"max_epochs":1,"max_steps":60,"val_every":20,"checkpoint_every":0}` + "\n")
	for s := 1; s <= 60; s++ {
		fmt.Fprintf(&b, `{"type":"metrics","context":"train","epoch":%d,"step":%d,"loss":%g}`+"\n", (s+29)/30, s, 5-float64(s)/30)
		if s%20 == 0 {
			b.WriteString(validateLine((s+29)/30, s, fmt.Sprintf(`"val_loss":%g`, 4-float64(s)/100)))
			fmt.Fprintf(&b, `{"type":"metrics","context":"data","epoch":%d,"step":%d,"tokens_per_second":%d,"mfu":0.3}`+"\n", (s+29)/30, s, 1000*s)
		}
	}
	b.WriteString(`{"type":"finish","status":"completed"}` + "\n")
	writeFile(t, filepath.Join(dir, board.MetricsFile), b.String())
}

// TestStepBasedRun: a step-based run's validate and data points are one per validation, at its
// step (two sharing an epoch both kept), its steps per epoch taken from the train lines (a
// validation ends no epoch); as logged they are drawn on the step axis, the sections saying how
// often they come; the runs table still shows the epoch and the step.
func TestStepBasedRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gpt")
	os.Mkdir(dir, 0o755)
	stepRun(t, dir)
	srv := serve(t, board.Config{Runs: []string{dir}})
	r := runs(t, srv)[0]
	want := []board.Point{{X: 20, Y: 3.8, Step: 20, Epoch: 1}, {X: 40, Y: 3.6, Step: 40, Epoch: 2}, {X: 60, Y: 3.4, Step: 60, Epoch: 2}}
	if got := r.Validate["val_loss"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Validate[val_loss] = %v, want %v", got, want)
	}
	if got := r.Data["tokens_per_second"]; len(got) != 3 || got[1].X != 40 || got[1].Y != 40000 || len(r.Data["mfu"]) != 3 {
		t.Errorf("Data = %v, want tokens_per_second and mfu at steps 20, 40, 60", r.Data)
	}
	if r.ValEvery != 20 || r.StepsPerEpoch != 30 || r.Epoch != 2 || r.Step != 60 || len(r.Warnings) != 0 {
		t.Errorf("ValEvery %d, StepsPerEpoch %v, epoch %d, step %d, warnings %q; want 20, 30, 2, 60, none",
			r.ValEvery, r.StepsPerEpoch, r.Epoch, r.Step, r.Warnings)
	}
	page := get(t, srv.URL+"/")
	for _, w := range []string{`<h2>validation, logged per validation (every 20 steps)</h2>`, `<h2>data path, logged per validation (every 20 steps)</h2>`,
		`<td class="phase">finished</td><td>2</td><td>60</td>`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if strings.Contains(page, "logged per epoch") {
		t.Errorf("a step-based run's section says per epoch")
	}
	c := chartOf(t, page, "validate", "val_loss")
	if !strings.Contains(c, `data-points="3"`) || !strings.Contains(c, `>step</text>`) {
		t.Errorf("as logged, val_loss should be 3 points on the step axis:\n%s", c)
	}

	// Beside an epoch-based run, both runs' validations are drawn on the step axis as logged.
	ep := filepath.Join(filepath.Dir(dir), "mlp")
	os.Mkdir(ep, 0o755)
	writeFile(t, filepath.Join(ep, board.MetricsFile), trainLine(1, 2)+trainLine(2, 1)+validateLine(1, 2, `"val_loss":3.9`))
	page = get(t, serve(t, board.Config{Runs: []string{ep, dir}}).URL+"/")
	c = chartOf(t, page, "validate", "val_loss")
	if w := `<h2>validation, logged per epoch or per validation (every 20 steps)</h2>`; !strings.Contains(page, w) {
		t.Errorf("the mixed board lacks %q", w)
	}
	for _, w := range []string{`data-run="mlp" data-points="1"`, `data-run="gpt" data-points="3"`, `>step</text>`} {
		if !strings.Contains(c, w) {
			t.Errorf("the mixed board's val_loss chart lacks %q:\n%s", w, c)
		}
	}
}
