package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/sweep"
)

// sweepFast is a sweep's trials at about a second each: the tiny preset on a slice of MNIST.
var sweepFast = []string{"sweep", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=3000", "--set", "ValSize=1000", "--max-epochs", "3"}

// TestSweepRefusesBeforeTheFirstTrial: an unknown field, a range its distribution cannot have, a
// fraction for an integer field, a grid over a continuous range and a metric the experiment does
// not report are each refused by name, the fix said, and no record written.
func TestSweepRefusesBeforeTheFirstTrial(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--param", "Hiden=int:32,64"}, []string{"Hiden", "Hidden"}},
		{[]string{"--param", "LearningRate=loguniform:0,1e-2"}, []string{"LearningRate", "loguniform", "low"}},
		{[]string{"--param", "Hidden=uniform:16,64"}, []string{"Hidden is an integer field", "Hidden=int:16,64"}},
		{[]string{"--param", "Hidden=choice:16,wide"}, []string{"Hidden", "wide"}},
		{[]string{"--param", "LearningRate=loguniform:1e-3,1e-2", "--sampler", "grid"}, []string{"LearningRate", "choice"}},
		{[]string{"--param", "Hidden=choice:16,32", "--sampler", "grid", "--trials", "3"}, []string{"2 combinations", "--trials"}},
		{[]string{"--param", "LearningRate=loguniform:1e-3,1e-2", "--metric", "val_bogus"}, []string{"val_bogus", "val_loss", "val_accuracy"}},
		{[]string{"--param", "LearningRate=loguniform:1e-3,1e-2", "--prune", "hyperband"}, []string{"--prune", "asha"}},
		{[]string{}, []string{"--param"}},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "sweep")
		args := append(append(append([]string(nil), sweepFast...), "--sweep-dir", dir), c.args...)
		code, _, errOut := runCLI(args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want a refusal", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: error %q lacks %q", c.args, errOut, w)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "journal.log")); err == nil {
			t.Errorf("%v: a refused sweep wrote its record", c.args)
		}
	}
}

// TestSweepTrialsShareTheirPrograms: a sweep over a Host and a Device field runs every trial on the
// programs the first compiled (the record counts the in-process cache's misses: one set), each
// trial in its own run dir with its record, the progress line and ls/best reading the record.
func TestSweepTrialsShareTheirPrograms(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	// A width no other test of this package trains: the process's compile cache holds no program
	// of it, so the first trial compiles the set.
	args := append(append([]string(nil), sweepFast...), "--set", "Hidden=41", "--sweep-dir", dir, "--trials", "4", "--sampler", "random", "--prune", "asha",
		"--param", "LearningRate=loguniform:1e-3,1e-1", "--param", "WeightDecay=loguniform:1e-6,1e-2")
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, w := range []string{"LearningRate: Host, never traced: no recompile", "WeightDecay: Device, a program input: no recompile",
		"up to 1 set(s) of compiled programs for 4 trials"} {
		if !strings.Contains(out, w) {
			t.Errorf("the report lacks %q:\n%s", w, out)
		}
	}
	if !regexp.MustCompile(`trial 4/4, 0 running(, \d+ pruned)?, best val_loss [0-9.]+ \(trial \d\)`).MatchString(out) {
		t.Errorf("no final progress line:\n%s", out)
	}
	st, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Trials) != 4 {
		t.Fatalf("%d trials recorded, want 4", len(st.Trials))
	}
	first := -1.0
	for _, tr := range st.Trials {
		if tr.State != sweep.Complete && tr.State != sweep.Pruned {
			t.Errorf("trial %d ended %s: %v", tr.Number, tr.State, tr.Attrs["error"])
		}
		if _, err := os.Stat(filepath.Join(dir, sweep.TrialDir(tr.Number), "metrics.jsonl")); err != nil {
			t.Errorf("trial %d: %v", tr.Number, err)
		}
		misses, _ := tr.Attrs["program_cache_misses"].(float64)
		if tr.Number == 0 {
			first = misses
		} else if misses != 0 {
			t.Errorf("trial %d missed the in-process program cache %v times; want 0 (the first trial's programs)", tr.Number, misses)
		}
	}
	if first <= 0 {
		t.Errorf("trial 0 compiled %v programs, want the run's set (> 0)", first)
	}
	if total, _ := st.Attrs["program_cache_misses"].(float64); total != first {
		t.Errorf("the sweep missed the program cache %v times, trial 0 %v: want the same (one set of programs)", total, first)
	}
	// Optuna reads the record the command wrote: every trial, and the same best.
	py := prereq.OptunaPython.Interpreter(t, "NITRO_OPTUNA_PYTHON")
	raw, err := exec.Command(py, filepath.Join("..", "..", "sweep", "testdata", "load_study.py"), "read", filepath.Join(dir, sweep.JournalFile), "mnist-mlp").Output()
	if err != nil {
		prereq.OptunaPython.Broken(t, err.Error())
	}
	var seen struct {
		Trials []struct {
			Number int    `json:"number"`
			State  string `json:"state"`
		} `json:"trials"`
		Best *int `json:"best"`
	}
	if err := json.Unmarshal(raw, &seen); err != nil {
		t.Fatalf("load_study.py: %v\n%s", err, raw)
	}
	if b, _ := st.Best(); len(seen.Trials) != 4 || seen.Best == nil || *seen.Best != b.Number {
		t.Errorf("Optuna sees %d trials, best %v; nitro %d, best %d\n%s", len(seen.Trials), seen.Best, len(st.Trials), b.Number, raw)
	}
	code, ls, _ := runCLI("sweep", "ls", dir)
	if code != 0 || !strings.Contains(ls, "4 trials recorded of 4") || len(regexp.MustCompile(`(?m)^\d+ +(COMPLETE|PRUNED) `).FindAllString(ls, -1)) != 4 || !strings.Contains(ls, "space: LearningRate=loguniform:0.001,0.1 WeightDecay=loguniform:1e-06,0.01") {
		t.Errorf("sweep ls: exit %d\n%s", code, ls)
	}
	b, _ := st.Best()
	code, best, _ := runCLI("sweep", "best", dir)
	if code != 0 || !strings.Contains(best, "--set LearningRate=") || !strings.Contains(best, sweep.TrialDir(b.Number)) {
		t.Errorf("sweep best: exit %d\n%s", code, best)
	}
	// The same command again refuses to overwrite the record; --resume with all trials done runs none.
	if code, _, errOut := runCLI(args...); code == 0 || !strings.Contains(errOut, "--resume") {
		t.Errorf("a second sweep into %s: exit %d, %q; want a refusal naming --resume", dir, code, errOut)
	}
	// A resume under other trial settings would mix incomparable trials: refused, named.
	if code, _, errOut := runCLI(append(args, "--resume", "--max-epochs", "2")...); code == 0 || !strings.Contains(errOut, "max_epochs was 3, now 2") {
		t.Errorf("a resume with --max-epochs 2 over a sweep of 3: exit %d, %q; want a refusal naming max_epochs", code, errOut)
	}
	code, out, errOut = runCLI(append(args, "--resume")...)
	if code != 0 || strings.Contains(out, "COMPLETE") {
		t.Errorf("resume of a finished sweep: exit %d\n%s%s", code, out, errOut)
	}
}

// TestSweepWorkerProcesses: --parallel 2 trains the trials in two worker processes (the default
// mode) with the same values, states and reports as one process would, pruning included: the
// sweep's process keeps the record and answers every report.
func TestSweepWorkerProcesses(t *testing.T) {
	base := append(append([]string(nil), sweepFast...), "--trials", "5", "--sampler", "random",
		"--param", "LearningRate=loguniform:1e-3,1e-1", "--param", "WeightDecay=loguniform:1e-6,1e-2")
	one := filepath.Join(t.TempDir(), "one")
	if code, out, errOut := runCLI(append(base, "--sweep-dir", one)...); code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", code, out, errOut)
	}
	two := filepath.Join(t.TempDir(), "two")
	if code, out, errOut := runCLI(append(base, "--sweep-dir", two, "--parallel", "2")...); code != 0 {
		t.Fatalf("sweep --parallel 2: exit %d\n%s\n%s", code, out, errOut)
	}
	a, err := sweep.Load(one)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sweep.Load(two)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Trials) != 5 || len(b.Trials) != 5 {
		t.Fatalf("%d and %d trials recorded, want 5", len(a.Trials), len(b.Trials))
	}
	pids := map[any]bool{}
	for i := range a.Trials {
		x, y := a.Trials[i], b.Trials[i]
		if x.State != y.State || x.Value != y.Value || len(x.Intermediate) != len(y.Intermediate) {
			t.Errorf("trial %d: %s %v (%d reports) in one process, %s %v (%d) in workers", i, x.State, x.Value, len(x.Intermediate), y.State, y.Value, len(y.Intermediate))
		}
		pids[y.Attrs["pid"]] = true
	}
	if len(pids) != 2 {
		t.Errorf("the trials ran in processes %v; want 2 workers", pids)
	}
}
