package sweep

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// optunaStudy runs testdata/load_study.py (mode read or write) on dir's journal and returns what
// Optuna sees there.
func optunaStudy(t *testing.T, mode, dir, name string) map[string]any {
	t.Helper()
	py := prereq.OptunaPython.Interpreter(t, "NITRO_OPTUNA_PYTHON")
	out, err := exec.Command(py, "testdata/load_study.py", mode, filepath.Join(dir, JournalFile), name).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		prereq.OptunaPython.Broken(t, string(stderr)+err.Error())
	}
	v, err := parseJSON(out) // Python's dialect: NaN bare
	if err != nil {
		t.Fatalf("load_study.py printed what is not JSON (%v): %s", err, out)
	}
	return v.(map[string]any)
}

// same compares two values as the JSON reader makes them, NaN equal to NaN.
func same(a, b any) bool { return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) }

// compareWithOptuna checks that Optuna's view py of a journal is nitro's st: the study's name,
// direction, attrs and best trial, and every trial's state, value, params with their
// distributions, intermediate values and attrs.
func compareWithOptuna(t *testing.T, st *Study, py map[string]any) {
	t.Helper()
	if py["study_name"] != st.Name {
		t.Errorf("study name: Optuna %v, nitro %q", py["study_name"], st.Name)
	}
	dir := "MINIMIZE"
	if st.Maximize {
		dir = "MAXIMIZE"
	}
	if py["direction"] != dir {
		t.Errorf("direction: Optuna %v, nitro %s", py["direction"], dir)
	}
	attrs := map[string]any{}
	for k, v := range py["user_attrs"].(map[string]any) {
		attrs[k] = v
	}
	if m, ok := attrs["metric"]; ok || st.Metric != "" {
		if m != st.Metric {
			t.Errorf("metric: Optuna %v, nitro %q", m, st.Metric)
		}
		delete(attrs, "metric")
	}
	if sp, ok := attrs["space"]; ok {
		if !same(sp, spaceText(st.Space)) {
			t.Errorf("space: Optuna %v, nitro %v", sp, spaceText(st.Space))
		}
		delete(attrs, "space")
	}
	if !same(attrs, st.Attrs) {
		t.Errorf("study attrs: Optuna %v, nitro %v", attrs, st.Attrs)
	}
	best, ok := st.Best()
	if want := py["best"]; (want == nil) != !ok || (ok && want != float64(best.Number)) {
		t.Errorf("best trial: Optuna %v, nitro %d (%v)", want, best.Number, ok)
	}

	trials := py["trials"].([]any)
	if len(trials) != len(st.Trials) {
		t.Fatalf("Optuna sees %d trials, nitro %d", len(trials), len(st.Trials))
	}
	for i, tv := range trials {
		pt := tv.(map[string]any)
		gt := st.Trials[i]
		where := "trial " + strconv.Itoa(i)
		if pt["number"] != float64(gt.Number) || gt.Number != i {
			t.Errorf("%s: number: Optuna %v, nitro %d", where, pt["number"], gt.Number)
		}
		if pt["state"] != string(gt.State) {
			t.Errorf("%s: state: Optuna %v, nitro %s", where, pt["state"], gt.State)
		}
		if v, has := pt["value"].(float64); has != gt.HasValue || (has && !same(v, gt.Value)) {
			t.Errorf("%s: value: Optuna %v, nitro %v (has %v)", where, pt["value"], gt.Value, gt.HasValue)
		}
		if pt["started"] != true || pt["completed"] != (gt.State != Running) {
			t.Errorf("%s: times: Optuna started %v completed %v", where, pt["started"], pt["completed"])
		}
		internal := map[string]any{}
		for k, v := range gt.Params {
			internal[k] = v
		}
		if !same(pt["internal"], internal) {
			t.Errorf("%s: params: Optuna %v, nitro %v", where, pt["internal"], internal)
		}
		params := pt["params"].(map[string]any)
		dists := pt["distributions"].(map[string]any)
		for name, v := range gt.Params {
			i := st.Space.index(name)
			if i < 0 {
				t.Errorf("%s: param %s is not in nitro's space", where, name)
				continue
			}
			p := st.Space[i]
			d := dists[name].(map[string]any)
			var want map[string]any
			var ext any = v
			switch p.Kind {
			case Uniform, LogUniform:
				want = map[string]any{"class": "FloatDistribution", "low": p.Low, "high": p.High, "log": p.Kind == LogUniform, "step": nil}
			case Int:
				want = map[string]any{"class": "IntDistribution", "low": p.Low, "high": p.High, "log": false, "step": 1.0}
			case Choice:
				cs := make([]any, len(p.Choices))
				for k, c := range p.Choices {
					cs[k] = c
				}
				want = map[string]any{"class": "CategoricalDistribution", "choices": cs}
				ext = p.Choices[int(v)]
			}
			if !same(d, want) {
				t.Errorf("%s: param %s's distribution: Optuna %v, nitro's space %v", where, name, d, want)
			}
			if !same(params[name], ext) {
				t.Errorf("%s: param %s: Optuna %v, nitro %v", where, name, params[name], ext)
			}
		}
		inter := map[string]any{}
		for k, v := range gt.Intermediate {
			inter[strconv.Itoa(k)] = v
		}
		if !same(pt["intermediate"], inter) {
			t.Errorf("%s: intermediate values: Optuna %v, nitro %v", where, pt["intermediate"], inter)
		}
		if !same(pt["user_attrs"], gt.Attrs) {
			t.Errorf("%s: user attrs: Optuna %v, nitro %v", where, pt["user_attrs"], gt.Attrs)
		}
	}
}

// TestOptunaReadsSweep has optuna.load_study read a journal nitro wrote: every trial (complete,
// pruned with a NaN report, failed, running), its params and distributions, values, intermediate
// values and attrs, the study's direction and attrs, and best_trial.
// Run alone: NITRO_OPTUNA_PYTHON=$PWD/.nitro/optuna-venv/bin/python go test -run Optuna ./sweep/
func TestOptunaReadsSweep(t *testing.T) {
	dir := t.TempDir()
	j := writeSmallStudy(t, dir)
	st := j.Study()
	py := optunaStudy(t, "read", dir, st.Name)
	compareWithOptuna(t, st, py)

	// And after a resume that finishes the running trial and maximizes nothing new: Optuna still
	// reads it, and best_trial moves to the better value.
	mustJ(t, j.Close())
	j2, _, err := Open(dir)
	mustJ(t, err)
	mustJ(t, j2.Finish(3, Complete, 0.25, true))
	st = j2.Study()
	mustJ(t, j2.Close())
	py = optunaStudy(t, "read", dir, st.Name)
	compareWithOptuna(t, st, py)
	if py["best"] != 3.0 {
		t.Errorf("Optuna's best_trial after the resume: %v, want 3", py["best"])
	}
}

// TestSweepReadsOptuna has Optuna write a study with its own JournalStorage (two trials, the
// second pruned after a NaN report) and nitro's Load read it as Optuna does.
func TestSweepReadsOptuna(t *testing.T) {
	dir := t.TempDir()
	py := optunaStudy(t, "write", dir, "from-optuna")
	st, err := Load(dir)
	mustJ(t, err)
	compareWithOptuna(t, st, py)
	if !st.Maximize || st.Metric != "val_acc" || st.Attrs["seed"] != 3.0 {
		t.Fatalf("study %+v", st)
	}
	if len(st.Trials) != 2 || st.Trials[0].State != Complete || st.Trials[1].State != Pruned || !math.IsNaN(st.Trials[1].Intermediate[1]) {
		t.Fatalf("trials %+v", st.Trials)
	}
	// With no space of nitro's recorded, the space is the trials' distributions, in the order
	// Optuna's trial suggested them.
	want := Space{
		{Name: "LearningRate", Kind: LogUniform, Low: 1e-4, High: 1e-1},
		{Name: "Layers", Kind: Int, Low: 1, High: 4},
		{Name: "Act", Kind: Choice, Choices: []string{"relu", "gelu"}},
		{Name: "Dropout", Kind: Uniform, Low: 0, High: 0.5},
	}
	if d := st.Space.Diff(want); d != "" {
		t.Fatalf("derived space: %s", d)
	}
	names := make([]string, 0, len(st.Trials[0].Params))
	for k := range st.Trials[0].Params {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) != 4 {
		t.Fatalf("trial 0's params: %v", st.Trials[0].Params)
	}
	// It is not a nitro sweep's record, so it is not resumed.
	if _, _, err := Open(dir); err == nil {
		t.Fatal("Open of a study Optuna wrote without a sweep's space: no error")
	}
}
