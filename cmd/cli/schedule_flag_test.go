package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScheduleFlag: train --schedule overrides the experiment's schedule of one key for the run:
// the binding report marks the row "run option", the record's params line holds the text, and a
// key that binds nothing, a schedule that does not parse, a key given twice and the flag on
// evaluate are refused, each naming the flag and the fix.
func TestScheduleFlag(t *testing.T) {
	dir := t.TempDir()
	args := append(append([]string{"train"}, fast...), "--run-dir", dir, "--set", "Cosine=true", "--schedule", "eta=warmup_cosine:0.2,0.002,0", "mnist-mlp")
	code, out, errs := runCLI(args...)
	if code != 0 {
		t.Fatalf("train --schedule: exit %d: %s\n%s", code, errs, out)
	}
	for _, w := range []string{"schedule eta (run option)", "the run option's eta replaces the experiment's Schedules() key eta"} {
		if !strings.Contains(out+errs, w) {
			t.Errorf("train --schedule does not say %q:\n%s\n%s", w, out, errs)
		}
	}
	rec, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || !strings.Contains(string(rec), `"schedule.eta":"warmup_cosine:0.2,0.002,0"`) {
		t.Errorf("the params line lacks schedule.eta (%v):\n%.800s", err, rec)
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--schedule", "lr=0.01"}, []string{"the run's schedules (run option)", "unknown schedule key lr", "the learning-rate key is eta"}},
		{[]string{"--schedule", "eta=cosin:0.1,0"}, []string{`--schedule eta: schedule "cosin:0.1,0": unknown form "cosin"`, "cosine:peak,floor"}},
		{[]string{"--schedule", "eta"}, []string{`--schedule "eta": write KEY=SCHEDULE`}},
		{[]string{"--schedule", "eta=0.1", "--schedule", "eta=0.2"}, []string{"--schedule eta is given twice"}},
	} {
		a := append(append(append([]string{"train"}, fast...), "--no-log"), c.args...)
		code, _, errs := runCLI(append(a, "mnist-mlp")...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errs)
			}
		}
	}
	if code, _, errs := runCLI("evaluate", "mnist-mlp", "--schedule", "eta=0.1"); code == 0 || !strings.Contains(errs, "--schedule is a train flag") {
		t.Errorf("evaluate --schedule: exit %d, stderr %q", code, errs)
	}
}
