package sweep

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/journal.golden from what the journal writes now")

// journalSpace has one param of each kind.
var journalSpace = Space{
	{Name: "LearningRate", Kind: LogUniform, Low: 1e-4, High: 1e-1},
	{Name: "Dropout", Kind: Uniform, Low: 0, High: 0.5},
	{Name: "Layers", Kind: Int, Low: 1, High: 4},
	{Name: "Act", Kind: Choice, Choices: []string{"relu", "gelu", "tanh"}},
}

func mustJ(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// studyText is a study as text: fmt sorts maps and prints NaN, so two studies with NaN
// intermediate values compare equal where reflect.DeepEqual would not.
func studyText(s *Study) string { return fmt.Sprintf("%#v", *s) }

func sameStudy(t *testing.T, what string, got, want *Study) {
	t.Helper()
	if g, w := studyText(got), studyText(want); g != w {
		t.Fatalf("%s differs:\n got %s\nwant %s", what, g, w)
	}
}

// writeSmallStudy records 4 trials: complete, pruned (with a NaN report), failed, and one
// left running (as a kill leaves it).
func writeSmallStudy(t *testing.T, dir string) *Journal {
	t.Helper()
	j, err := Create(dir, "small", "val_loss", false, journalSpace, map[string]any{"sampler": "tpe", "seed": 7, "trials": 10})
	mustJ(t, err)
	n, err := j.StartTrial(map[string]float64{"LearningRate": 0.003, "Dropout": 0.25, "Layers": 2, "Act": 1}, map[string]any{"run_dir": "trials/0000", "seed": 7})
	mustJ(t, err)
	if n != 0 {
		t.Fatalf("first trial is number %d, want 0", n)
	}
	mustJ(t, j.Report(0, 1, 0.9))
	mustJ(t, j.Report(0, 2, 0.5))
	mustJ(t, j.SetTrialAttr(0, "compiles", 3))
	mustJ(t, j.Finish(0, Complete, 0.5, true))

	n, err = j.StartTrial(map[string]float64{"LearningRate": 0.0001, "Dropout": 0, "Layers": 4, "Act": 0}, map[string]any{"run_dir": "trials/0001", "seed": 8})
	mustJ(t, err)
	if n != 1 {
		t.Fatalf("second trial is number %d, want 1", n)
	}
	mustJ(t, j.Report(1, 1, math.NaN()))
	mustJ(t, j.Report(1, 2, 1.5))
	mustJ(t, j.Finish(1, Pruned, 1.5, true))

	_, err = j.StartTrial(map[string]float64{"LearningRate": 0.1, "Dropout": 0.5, "Layers": 1, "Act": 2}, map[string]any{"run_dir": "trials/0002", "seed": 9})
	mustJ(t, err)
	mustJ(t, j.SetTrialAttr(2, "error", "loss is NaN at step 40 \"quoted\" é"))
	mustJ(t, j.Finish(2, Fail, 0, false))

	_, err = j.StartTrial(map[string]float64{"LearningRate": 0.01, "Dropout": 0.1, "Layers": 3, "Act": 0}, nil)
	mustJ(t, err)
	mustJ(t, j.Report(3, 1, 0.7))
	mustJ(t, j.SetStudyAttr("compiles", map[string]any{"total": 4, "names": []string{"a", "b"}}))
	return j
}

func TestJournalRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	j := writeSmallStudy(t, dir)
	st := j.Study()

	// What the writer holds is what the file says.
	if st.Name != "small" || st.Metric != "val_loss" || st.Maximize || len(st.Trials) != 4 {
		t.Fatalf("study %+v", st)
	}
	if st.Space.Diff(journalSpace) != "" {
		t.Fatalf("space: %s", st.Space.Diff(journalSpace))
	}
	if st.Attrs["sampler"] != "tpe" || st.Attrs["seed"] != float64(7) || st.Attrs["metric"] != nil || st.Attrs["space"] != nil {
		t.Fatalf("study attrs %v", st.Attrs)
	}
	tr := st.Trials
	if tr[0].State != Complete || !tr[0].HasValue || tr[0].Value != 0.5 || tr[0].Intermediate[1] != 0.9 || tr[0].Attrs["compiles"] != float64(3) || tr[0].Attrs["run_dir"] != "trials/0000" {
		t.Fatalf("trial 0: %+v", tr[0])
	}
	if tr[0].Params["LearningRate"] != 0.003 || tr[0].Params["Layers"] != 2 || tr[0].Params["Act"] != 1 || tr[0].Params["Dropout"] != 0.25 {
		t.Fatalf("trial 0 params: %v", tr[0].Params)
	}
	if tr[1].State != Pruned || tr[1].Value != 1.5 || !math.IsNaN(tr[1].Intermediate[1]) {
		t.Fatalf("trial 1: %+v", tr[1])
	}
	if tr[2].State != Fail || tr[2].HasValue || !strings.Contains(tr[2].Attrs["error"].(string), `"quoted" é`) {
		t.Fatalf("trial 2: %+v", tr[2])
	}
	if tr[3].State != Running || tr[3].HasValue || tr[3].Intermediate[1] != 0.7 || len(tr[3].Attrs) != 0 {
		t.Fatalf("trial 3: %+v", tr[3])
	}
	if b, ok := st.Best(); !ok || b.Number != 0 {
		t.Fatalf("best: %+v %v", b, ok)
	}
	// Study is a copy: changing it changes nothing recorded.
	st.Trials[0].Params["Layers"] = 99
	st.Attrs["compiles"].(map[string]any)["total"] = 0
	if j.Study().Trials[0].Params["Layers"] != 2 || j.Study().Attrs["compiles"].(map[string]any)["total"] != float64(4) {
		t.Fatal("Study() shares state with the journal")
	}
	st = j.Study()

	loaded, err := Load(dir) // beside the writer: no lock needed
	mustJ(t, err)
	sameStudy(t, "Load beside the writer", loaded, st)
	mustJ(t, j.Close())

	j2, opened, err := Open(dir)
	mustJ(t, err)
	sameStudy(t, "Open", opened, st)
	if j2.Repaired() != "" {
		t.Fatalf("nothing torn, yet Repaired says %q", j2.Repaired())
	}
	// The resumed writer goes on where the first stopped.
	mustJ(t, j2.Report(3, 2, 0.4))
	mustJ(t, j2.Finish(3, Complete, 0.4, true))
	n, err := j2.StartTrial(map[string]float64{"LearningRate": 0.02, "Dropout": 0.2, "Layers": 2, "Act": 2}, nil)
	mustJ(t, err)
	if n != 4 {
		t.Fatalf("trial after resume is number %d, want 4", n)
	}
	st = j2.Study()
	mustJ(t, j2.Close())
	loaded, err = Load(dir)
	mustJ(t, err)
	sameStudy(t, "Load after resume", loaded, st)
	if b, ok := loaded.Best(); !ok || b.Number != 3 || b.Value != 0.4 {
		t.Fatalf("best after resume: %+v %v", b, ok)
	}
}

func TestJournalRefusesBadCalls(t *testing.T) {
	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"report on a finished trial", j.Report(0, 3, 1), "trial 0 is COMPLETE"},
		{"no such trial", j.Report(9, 1, 1), "no trial 9"},
		{"complete without a value", j.Finish(3, Complete, 0, false), "needs a value"},
		{"complete with NaN", j.Finish(3, Complete, math.NaN(), true), "needs a value"},
		{"finish as running", j.Finish(3, Running, 0, false), "not \"RUNNING\""},
		{"reserved study attr", j.SetStudyAttr("metric", "x"), "fixed when the sweep is created"},
		{"attr on a finished trial", j.SetTrialAttr(1, "x", 1), "trial 1 is PRUNED"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, c.err, c.want)
		}
	}
	_, err := j.StartTrial(map[string]float64{"LearningRate": 0.5, "Dropout": 0, "Layers": 1, "Act": 0}, nil)
	if err == nil || !strings.Contains(err.Error(), "LearningRate") {
		t.Errorf("a value outside the space: %v", err)
	}
	_, err = j.StartTrial(map[string]float64{"LearningRate": 0.01, "Dropout": 0, "Layers": 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "Act") {
		t.Errorf("a missing param: %v", err)
	}
	if _, err := Create(t.TempDir(), "s", "m", false, Space{}, nil); err == nil {
		t.Error("Create with an empty space: no error")
	}
	// None of the refusals wrote anything.
	st, err := Load(dir)
	mustJ(t, err)
	sameStudy(t, "after refusals", st, j.Study())
	if len(st.Trials) != 4 {
		t.Fatalf("%d trials", len(st.Trials))
	}
	mustJ(t, j.Close())
	if _, err := Create(dir, "again", "m", false, journalSpace, nil); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("Create over a record: %v", err)
	}
}

func TestJournalTornLastLine(t *testing.T) {
	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	want := j.Study()
	mustJ(t, j.Close())
	path := filepath.Join(dir, JournalFile)
	whole, err := os.ReadFile(path)
	mustJ(t, err)
	lines := bytes.Count(whole, []byte{'\n'})
	// A kill mid-append leaves the start of a line with no newline.
	torn := `{"op_code":7,"worker_id":"nitro-1","trial_id":3,"step":2,"interm`
	mustJ(t, os.WriteFile(path, append(append([]byte{}, whole...), torn...), 0o644))

	st, err := Load(dir)
	mustJ(t, err)
	sameStudy(t, "Load with a torn last line", st, want)
	if got, _ := os.ReadFile(path); len(got) != len(whole)+len(torn) {
		t.Fatal("Load changed the file")
	}

	j2, st, err := Open(dir)
	mustJ(t, err)
	sameStudy(t, "Open with a torn last line", st, want)
	if r := j2.Repaired(); !strings.Contains(r, "line "+strconv.Itoa(lines+1)) || !strings.Contains(r, "nothing else is lost") {
		t.Fatalf("Repaired: %q", r)
	}
	got, err := os.ReadFile(path)
	mustJ(t, err)
	if !bytes.Equal(got, whole) {
		t.Fatalf("Open left %d bytes, want the %d of whole lines", len(got), len(whole))
	}
	mustJ(t, j2.Report(3, 2, 0.25))
	mustJ(t, j2.Close())
	st, err = Load(dir)
	mustJ(t, err)
	if st.Trials[3].Intermediate[2] != 0.25 {
		t.Fatalf("the report after the repair: %v", st.Trials[3].Intermediate)
	}
}

func TestJournalRefusesDamage(t *testing.T) {
	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	mustJ(t, j.Close())
	path := filepath.Join(dir, JournalFile)
	whole, err := os.ReadFile(path)
	mustJ(t, err)
	lines := strings.SplitAfter(string(whole), "\n")
	lines = lines[:len(lines)-1]
	with := func(i int, line string) string {
		out := append([]string{}, lines[:i]...)
		out = append(out, line)
		return strings.Join(append(out, lines[i:]...), "")
	}
	for _, c := range []struct {
		name, file, want string
	}{
		{"garbage middle line", with(5, "garbage\n"), "line 6 is not a JSON object"},
		{"garbage last whole line", with(len(lines), "{\"op_code\":\n"), "line " + strconv.Itoa(len(lines)+1)},
		{"unknown op code", with(5, `{"op_code":42,"worker_id":"w"}`+"\n"), "line 6: unknown op_code 42"},
		{"no worker id", with(5, `{"op_code":7,"trial_id":0,"step":1,"intermediate_value":1}`+"\n"), `line 6: "worker_id"`},
		{"no such trial", with(5, `{"op_code":7,"worker_id":"w","trial_id":99,"step":1,"intermediate_value":1}`+"\n"), "line 6: trial_id 99"},
		{"a trial before the study", `{"op_code":4,"worker_id":"w","study_id":0,"datetime_start":null}` + "\n", "line 1: op_code 4 comes before the study"},
		{"a second study", with(3, `{"op_code":0,"worker_id":"w","study_name":"other","directions":[1]}`+"\n"), "line 4: a second study"},
		{"study deleted", with(len(lines), `{"op_code":1,"worker_id":"w","study_id":0}`+"\n"), "deletes the study"},
		{"a param out of the space", with(len(lines), `{"op_code":4,"worker_id":"w","study_id":0,"datetime_start":"2026-01-02T03:04:05.000000+00:00","distributions":{"Depth":"{\"name\": \"IntDistribution\", \"attributes\": {\"log\": false, \"step\": 1, \"low\": 1, \"high\": 8}}"},"params":{"Depth":2.0}}`+"\n"), `param "Depth" is not in the study's space`},
		{"a bad time", with(len(lines), `{"op_code":6,"worker_id":"w","trial_id":3,"state":1,"values":[1.0],"datetime_complete":"yesterday"}`+"\n"), "not an ISO 8601 time"},
	} {
		mustJ(t, os.WriteFile(path, []byte(c.file), 0o644))
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load: %v, want an error with %q", c.name, err, c.want)
		}
		_, _, err = Open(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open: %v, want an error with %q", c.name, err, c.want)
		}
	}

	// A record Optuna wrote with no sweep's attrs loads, but does not resume.
	mustJ(t, os.WriteFile(path, []byte(strings.Join(lines[:1], "")), 0o644))
	if _, err := Load(dir); err != nil {
		t.Errorf("Load of a bare study: %v", err)
	}
	if _, _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a nitro sweep's record") {
		t.Errorf("Open of a bare study: %v", err)
	}
	// No record at all.
	empty := t.TempDir()
	if _, _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "without --resume") {
		t.Errorf("Open of an empty dir: %v", err)
	}
	if _, err := Load(empty); err == nil {
		t.Error("Load of an empty dir: no error")
	}
}

func TestJournalLock(t *testing.T) {
	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	_, _, err := Open(dir)
	want := fmt.Sprintf("another nitro sweep is writing %s (pid %d)", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open while locked: %v, want %q", err, want)
	}
	if _, err := Load(dir); err != nil {
		t.Fatalf("Load while locked: %v", err)
	}
	mustJ(t, j.Close())
	if err := j.Report(3, 9, 1); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Report after Close: %v", err)
	}
	j2, _, err := Open(dir)
	mustJ(t, err)
	mustJ(t, j2.Close())
}

// TestJournalConcurrent reports from many goroutines at once: every report is a whole line.
func TestJournalConcurrent(t *testing.T) {
	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range 20 {
				if err := j.Report(3, 100+g*20+s, float64(s)); err != nil {
					t.Error(err)
				}
				_ = j.Study()
			}
		}()
	}
	wg.Wait()
	want := j.Study()
	mustJ(t, j.Close())
	st, err := Load(dir)
	mustJ(t, err)
	sameStudy(t, "after concurrent reports", st, want)
	if n := len(st.Trials[3].Intermediate); n != 1+8*20 {
		t.Fatalf("%d intermediate values, want %d", n, 1+8*20)
	}
}

// TestJournalGolden pins the bytes written for a fixed study: a change to them is a change of the
// record's format, which Optuna must still read (optuna_test.go). Regenerate with
// `go test -run TestJournalGolden -update`.
func TestJournalGolden(t *testing.T) {
	clock := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	oldNow, oldWorker := now, newWorkerID
	now = func() time.Time { clock = clock.Add(1500 * time.Millisecond); return clock }
	newWorkerID = func() string { return "nitro-golden" }
	defer func() { now, newWorkerID = oldNow, oldWorker }()

	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	mustJ(t, j.Close())
	got, err := os.ReadFile(filepath.Join(dir, JournalFile))
	mustJ(t, err)
	golden := filepath.Join("testdata", "journal.golden")
	if *update {
		mustJ(t, os.MkdirAll("testdata", 0o755))
		mustJ(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	mustJ(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("the journal differs from %s (rerun with -update if the change is meant):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
	// The golden file reads back as the study written.
	st, err := Load(dir)
	mustJ(t, err)
	if len(st.Trials) != 4 || st.Trials[1].State != Pruned {
		t.Fatalf("golden study %+v", st)
	}
}

// TestParseJSON covers the reader's Python dialect: bare NaN and infinities, escapes, and refusals.
func TestParseJSON(t *testing.T) {
	v, err := parseJSON([]byte(` {"a": [NaN, Infinity, -Infinity, -1.5e-3, 2, "\u00e9\n\"x"], "b": {}, "c": [], "d": null, "e": true} `))
	mustJ(t, err)
	m := v.(map[string]any)
	a := m["a"].([]any)
	if !math.IsNaN(a[0].(float64)) || !math.IsInf(a[1].(float64), 1) || !math.IsInf(a[2].(float64), -1) || a[3] != -1.5e-3 || a[4] != 2.0 || a[5] != "é\n\"x" {
		t.Fatalf("parsed %v", a)
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `{"a":1}x`, `"abc`, `01`, `-`, `nan`, `{1:2}`, strings.Repeat("[", 1000)} {
		if _, err := parseJSON([]byte(bad)); err == nil {
			t.Errorf("parseJSON(%q): no error", bad)
		}
	}
	var b bytes.Buffer
	mustJ(t, encodeValue(&b, obj{{"f", floatValue(8)}, {"n", math.NaN()}, {"i", math.Inf(-1)}, {"m", map[string]any{"z": 1, "a": []string{"x"}}}}, 0))
	if got, want := b.String(), `{"f":8.0,"n":NaN,"i":-Infinity,"m":{"a":["x"],"z":1}}`; got != want {
		t.Fatalf("encoded %s, want %s", got, want)
	}
}

// FuzzLoadJournal feeds the reader hostile files: it refuses or reads them, never panics, and
// what it reads it reads again the same from a fresh replay.
func FuzzLoadJournal(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "journal.golden"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(golden[:len(golden)/2])
	f.Add([]byte(`{"op_code":0,"worker_id":"w","study_name":"s","directions":[2]}` + "\n" + `{"op_code":4,"worker_id":"w","study_id":0,"datetime_start":null,"state":4}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rp, whole, err := replayBytes("journal.log", data)
		if err != nil {
			return
		}
		if whole > len(data) || (whole < len(data) && bytes.IndexByte(data[whole:], '\n') >= 0) {
			t.Fatalf("whole %d of %d bytes", whole, len(data))
		}
		st := rp.snapshot()
		rp2, _, err := replayBytes("journal.log", data[:whole])
		if err != nil {
			t.Fatalf("the whole lines alone do not read: %v", err)
		}
		if studyText(st) != studyText(rp2.snapshot()) {
			t.Fatal("two replays differ")
		}
		st.Best()
	})
}
