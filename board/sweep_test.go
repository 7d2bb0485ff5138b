package board_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/board"
	"github.com/nitro-go/nitro/sweep"
)

// sweepTrial is one trial of the test's sweep: its fields' values (Optuna's form: a choice's
// index), its reports by step 1, 2, ..., how it ended (Running: not yet).
type sweepTrial struct {
	lr, act, layers float64
	reports         []float64
	state           sweep.State
}

// The test sweep minimizes val_loss over 8 planned trials; 6 started: three complete (trial 1
// the best), one running, one pruned after its first report, one failed.
var sweepTrials = []sweepTrial{
	{1e-3, 0, 2, []float64{0.9, 0.5, 0.3}, sweep.Complete},
	{1e-2, 1, 3, []float64{0.8, 0.4, 0.2}, sweep.Complete},
	{1e-4, 2, 1, []float64{1.2}, sweep.Pruned},
	{5e-2, 1, 4, []float64{0.7, 0.35}, sweep.Running},
	{3e-3, 0, 2, []float64{0.95}, sweep.Fail},
	{2.3456789e-4, 2, 3, []float64{0.6, 0.45, 0.25}, sweep.Complete},
}

// makeSweep records the test sweep in dir as sweep.Run would: the journal, and each trial's run
// dir trials/NNNN with its validation lines.
func makeSweep(t *testing.T, dir string) {
	t.Helper()
	var space sweep.Space
	for _, s := range []string{"LearningRate=loguniform:1e-4,1e-1", "Act=choice:relu,gelu,<b>tanh</b>", "Layers=int:1,4"} {
		p, err := sweep.ParseParam(s)
		if err != nil {
			t.Fatal(err)
		}
		space = append(space, p)
	}
	j, err := sweep.Create(dir, "mlp-search", "val_loss", false, space, map[string]any{"trials": 8, "sampler": "random", "seed": 1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i, tr := range sweepTrials {
		rel := filepath.Join("trials", fmt.Sprintf("%04d", i))
		n, err := j.StartTrial(map[string]float64{"LearningRate": tr.lr, "Act": tr.act, "Layers": tr.layers}, map[string]any{"run_dir": rel, "seed": 1 + i})
		if err != nil || n != i {
			t.Fatalf("StartTrial: %d, %v; want trial %d", n, err, i)
		}
		run := filepath.Join(dir, rel)
		os.MkdirAll(run, 0o755)
		lines := fmt.Sprintf(`{"type":"params","learning_rate":%g,"layers":%g}`+"\n", tr.lr, tr.layers)
		for s, v := range tr.reports {
			if err := j.Report(n, s+1, v); err != nil {
				t.Fatal(err)
			}
			lines += trainLine(s+1, v+0.1) + validateLine(s+1, s+1, fmt.Sprintf(`"val_loss":%g`, v))
		}
		writeFile(t, filepath.Join(run, board.MetricsFile), lines)
		last := tr.reports[len(tr.reports)-1]
		switch tr.state {
		case sweep.Complete, sweep.Pruned:
			err = j.Finish(n, tr.state, last, true)
		case sweep.Fail:
			if err = j.SetTrialAttr(n, "error", "<script>alert(1)</script> out of memory"); err == nil {
				err = j.Finish(n, sweep.Fail, 0, false)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// section is the part of page from the first occurrence of start to the next end after it.
func section(t *testing.T, page, start, end string) string {
	t.Helper()
	i := strings.Index(page, start)
	if i < 0 {
		t.Fatalf("the page lacks %q:\n%s", start, page)
	}
	return page[i : i+strings.Index(page[i:], end)+len(end)]
}

// TestSweepView: a watched folder holding a sweep dir shows the sweep: its summary line, its
// trials ranked best first (complete by value, then running, pruned, failed) with the best
// marked, every trial's reports on one chart (the pruned one's curve ending early, crossed), one
// scatter per field of the complete and pruned trials; its trials' run dirs are runs named by
// number. Text from the record is escaped. A sweep whose journal is not one is shown with the
// error, the rest of the page still served.
func TestSweepView(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "search")
	makeSweep(t, dir)
	broken := filepath.Join(root, "broken")
	os.Mkdir(broken, 0o755)
	writeFile(t, filepath.Join(broken, board.JournalFile), "this is no journal\n")
	srv := serve(t, board.Config{Watch: []string{root}})

	page := get(t, srv.URL+"/")
	head := "sweep " + dir + ": 8 trials planned, 3 complete, 1 running, 1 pruned, 1 failed, best val_loss 0.2 (trial 1)"
	if !strings.Contains(page, `<h2 class="sweep-head">`+head+`</h2>`) {
		t.Errorf("the page lacks the summary %q", head)
	}
	table := section(t, page, `<table class="trials">`, `</table>`)
	var order []string
	for _, m := range regexp.MustCompile(`<tr class="[a-z ]+" data-trial="([0-9]+)" data-state="([A-Z]+)"`).FindAllStringSubmatch(table, -1) {
		order = append(order, m[1]+" "+m[2])
	}
	if got, want := strings.Join(order, ", "), "1 COMPLETE, 5 COMPLETE, 0 COMPLETE, 3 RUNNING, 2 PRUNED, 4 FAIL"; got != want {
		t.Errorf("trials ranked %s; want %s", got, want)
	}
	if n := strings.Count(table, "★ best"); n != 1 || !strings.Contains(table, `<tr class="trial best" data-trial="1"`) {
		t.Errorf("the best mark: %d marks, on trial 1's row: %v; want one, on trial 1", n, strings.Contains(table, `<tr class="trial best" data-trial="1"`))
	}
	for _, w := range []string{`<th title="LearningRate=loguniform:0.0001,0.1">LearningRate</th>`, `<td>0.01</td><td>gelu</td><td>3</td><td>trial 1</td>`,
		`<td>&lt;b&gt;tanh&lt;/b&gt;</td>`, `<td title="0.00023456789">0.0002346</td>`, `&lt;script&gt;alert(1)&lt;/script&gt; out of memory`, `<td class="value"><i>0.35</i></td><td>2</td>`} {
		if !strings.Contains(table, w) {
			t.Errorf("the trials table lacks %q:\n%s", w, table)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<b>tanh") {
		t.Errorf("text from the record is not escaped")
	}

	curves := section(t, page, `data-context="sweep" data-metric="val_loss"`, `</figure>`)
	if n := strings.Count(curves, `<polyline class="series`); n != len(sweepTrials) {
		t.Errorf("the curves chart draws %d series; want %d", n, len(sweepTrials))
	}
	for _, w := range []string{`data-run="trial 2" data-points="1" data-state="PRUNED" stroke-dasharray=`, `<path class="pruned-end" data-run="trial 2"`,
		`<polyline class="series best" data-run="trial 1" data-points="3" data-state="COMPLETE"`, `>step reported</text>`} {
		if !strings.Contains(curves, w) {
			t.Errorf("the curves chart lacks %q:\n%s", w, curves)
		}
	}
	lr := section(t, page, `data-context="sweep-scatter" data-param="LearningRate"`, `</figure>`)
	if !strings.Contains(lr, `data-points="4"`) || strings.Count(lr, `<circle class="pt `) != 4 || strings.Count(lr, `<circle class="pt pruned`) != 1 ||
		!strings.Contains(lr, `<circle class="pt complete best" data-trial="1" data-x="0.01" data-y="0.2"`) || !strings.Contains(lr, "LearningRate (log scale)") {
		t.Errorf("the LearningRate scatter should hold 3 complete points (the best ringed) and 1 pruned on a log axis:\n%s", lr)
	}
	act := section(t, page, `data-context="sweep-scatter" data-param="Act"`, `</figure>`)
	for _, w := range []string{`>relu</text>`, `>gelu</text>`, `>&lt;b&gt;tanh&lt;/…</text>`, "Act (choices)"} {
		if !strings.Contains(act, w) {
			t.Errorf("the Act scatter lacks the category %q:\n%s", w, act)
		}
	}
	if !strings.Contains(page, `data-context="sweep-scatter" data-param="Layers" data-points="4"`) {
		t.Errorf("the Layers scatter should hold 4 points")
	}

	// The broken sweep: its error, and the page goes on.
	bro := section(t, page, `data-sweep="`+broken+`"`, `</section>`)
	if !strings.Contains(bro, `sweep-error">the journal cannot be read: `) || !strings.Contains(bro, "0 trials so far") {
		t.Errorf("the broken sweep should say its journal cannot be read:\n%s", bro)
	}

	// The trials' run dirs are the board's runs, named by number, in number order.
	var names []string
	for _, r := range runs(t, srv) {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "trial 0,trial 1,trial 2,trial 3,trial 4,trial 5" {
		t.Errorf("runs %s; want the six trials by number", got)
	}
	if !strings.Contains(page, `<tr class="run" data-run="trial 3">`) {
		t.Errorf("the runs table lacks trial 3")
	}
	var api struct{ Sweeps []board.Sweep }
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/api/runs")), &api); err != nil {
		t.Fatal(err)
	}
	if len(api.Sweeps) != 2 || api.Sweeps[1].Best != 1 || api.Sweeps[1].Trials[0].Params["Act"] != "gelu" || api.Sweeps[0].Error == "" {
		t.Errorf("/api/runs sweeps: %+v", api.Sweeps)
	}

	// A sweep dir given as a run is a sweep too, not a run waiting for its metrics.jsonl.
	srv = serve(t, board.Config{Runs: []string{dir}})
	page = get(t, srv.URL+"/content")
	if !strings.Contains(page, head) || strings.Contains(page, broken) {
		t.Errorf("a sweep dir given as a run should be shown as its sweep, alone")
	}
}
