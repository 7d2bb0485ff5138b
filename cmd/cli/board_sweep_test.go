package cli_test

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/sweep"
)

// TestBoardSweepInChromium: `nitro board <sweep dir>` while the sweep runs. Headless Chromium
// loads the page with the page's refresh let run (so the sweep comes through /content too): the
// DOM holds the sweep's counts line, its trials ranked best first with the best marked, every
// trial's curve on one chart (the pruned one's crossed where it stopped), a scatter per field,
// and the trials' runs named by number. The running trial then finishes best, and the next load
// says so. A screenshot of the page (board-sweep.png, 1280x1500) is saved to the test's artifact
// folder (go test -artifacts -outputdir DIR keeps it; $NITRO_BOARD_SWEEP_SCREENSHOT names it
// instead).
func TestBoardSweepInChromium(t *testing.T) {
	bin := chromium(t)
	dir := filepath.Join(t.TempDir(), "search")
	var space sweep.Space
	for _, s := range []string{"LearningRate=loguniform:1e-4,1e-1", "Act=choice:relu,gelu,tanh", "Layers=int:1,4"} {
		p, err := sweep.ParseParam(s)
		if err != nil {
			t.Fatal(err)
		}
		space = append(space, p)
	}
	j, err := sweep.Create(dir, "mlp-search", "val_loss", false, space, map[string]any{"trials": 6, "seed": 1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	// Each trial: its fields, its val_loss per epoch, how it ended ("" still running).
	trials := []struct {
		lr, act, layers float64
		vals            []float64
		state           sweep.State
	}{
		{1e-3, 0, 2, []float64{0.9, 0.5, 0.3, 0.22}, sweep.Complete},
		{1e-2, 1, 3, []float64{0.8, 0.4, 0.25, 0.12}, sweep.Complete},
		{1e-4, 2, 1, []float64{1.3, 1.1}, sweep.Pruned},
		{3e-3, 0, 4, []float64{0.7, 0.35, 0.2}, ""},
		{5e-2, 1, 2, []float64{1.5}, sweep.Fail},
	}
	for i, tr := range trials {
		rel := sweep.TrialDir(i)
		n, err := j.StartTrial(map[string]float64{"LearningRate": tr.lr, "Act": tr.act, "Layers": tr.layers}, map[string]any{"run_dir": rel})
		if err != nil {
			t.Fatal(err)
		}
		var lines strings.Builder
		fmt.Fprintf(&lines, `{"type":"params","learning_rate":%g,"layers":%g}`+"\n", tr.lr, tr.layers)
		for e, v := range tr.vals {
			if err := j.Report(n, e+1, v); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&lines, `{"type":"metrics","context":"train","epoch":%d,"step":%d,"loss":%g}`+"\n", e+1, 10*(e+1), v+0.1)
			fmt.Fprintf(&lines, `{"type":"metrics","context":"validate","epoch":%d,"step":%d,"val_loss":%g}`+"\n", e+1, 10*(e+1), v)
		}
		os.MkdirAll(filepath.Join(dir, rel), 0o755)
		if err := os.WriteFile(filepath.Join(dir, rel, "metrics.jsonl"), []byte(lines.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		last := tr.vals[len(tr.vals)-1]
		switch tr.state {
		case sweep.Complete, sweep.Pruned:
			err = j.Finish(n, tr.state, last, true)
		case sweep.Fail:
			if err = j.SetTrialAttr(n, "error", "out of memory"); err == nil {
				err = j.Finish(n, sweep.Fail, 0, false)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	var bout, berr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	boardDone := make(chan int, 1)
	go func() {
		boardDone <- cli.MainContext(ctx, []string{"board", dir, "--addr", "127.0.0.1:0", "--refresh", "500ms"}, &bout, &berr)
	}()
	t.Cleanup(func() { stop(); <-boardDone })
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`board: (http://127\.0\.0\.1:[0-9]+/)`).FindStringSubmatch(bout.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("the board printed no URL: stdout %q, stderr %q", bout.String(), berr.String())
	}

	dom := browse(t, bin, url, "", "--virtual-time-budget=3000")
	if !strings.Contains(dom, `<span id="status">updated `) {
		t.Errorf("the page's script did not refresh the content")
	}
	head := "sweep " + dir + ": 6 trials planned, 2 complete, 1 running, 1 pruned, 1 failed, best val_loss 0.12 (trial 1)"
	if !strings.Contains(dom, head) {
		t.Errorf("the DOM lacks the sweep's line %q:\n%s", head, dom)
	}
	if got := trialOrder(dom); got != "1 0 3 2 4" {
		t.Errorf("the trials table ranks %s; want 1 0 3 2 4 (complete by val_loss, running, pruned, failed)", got)
	}
	curves := svgOf(t, dom, `data-context="sweep" data-metric="val_loss"`)
	for _, w := range []string{`class="series best" data-run="trial 1" data-points="4" data-state="COMPLETE"`,
		`data-run="trial 2" data-points="2" data-state="PRUNED"`, `class="pruned-end" data-run="trial 2"`, `data-run="trial 3" data-points="3" data-state="RUNNING"`} {
		if !strings.Contains(curves, w) {
			t.Errorf("the curves chart lacks %q:\n%s", w, curves)
		}
	}
	if n := strings.Count(curves, `<polyline class="series`); n != len(trials) {
		t.Errorf("the curves chart draws %d trials; want %d", n, len(trials))
	}
	for param, n := range map[string]int{"LearningRate": 3, "Act": 3, "Layers": 3} {
		if s := svgOf(t, dom, `data-context="sweep-scatter" data-param="`+param+`"`); !strings.Contains(s, fmt.Sprintf(`data-points="%d"`, n)) || strings.Count(s, `<circle class="pt `) != n {
			t.Errorf("the %s scatter should hold %d points (the complete trials and the pruned one):\n%s", param, n, s)
		}
	}
	for _, w := range []string{`<tr class="trial best" data-trial="1" data-state="COMPLETE" data-rank="1">`, "★ best", `<tr class="run" data-run="trial 4">`, "out of memory"} {
		if !strings.Contains(dom, w) {
			t.Errorf("the DOM lacks %q", w)
		}
	}

	// The running trial reports again and finishes best: the next load ranks it first.
	if err := j.Report(3, 4, 0.1); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(3, sweep.Complete, 0.1, true); err != nil {
		t.Fatal(err)
	}
	shot := os.Getenv("NITRO_BOARD_SWEEP_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.ArtifactDir(), "board-sweep.png")
	}
	dom = browse(t, bin, url, "")
	if w := "6 trials planned, 3 complete, 0 running, 1 pruned, 1 failed, best val_loss 0.1 (trial 3)"; !strings.Contains(dom, w) || trialOrder(dom) != "3 1 0 2 4" {
		t.Errorf("after trial 3 finished: the DOM should say %q and rank 3 1 0 2 4 (ranks %s)", w, trialOrder(dom))
	}
	browse(t, bin, url, shot, "--window-size=1280,1500")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.DecodeConfig(f)
	f.Close()
	if err != nil || img.Width != 1280 || img.Height != 1500 {
		t.Fatalf("screenshot %s: %+v, %v; want a 1280x1500 PNG", shot, img, err)
	}
	t.Logf("screenshot: %s", shot)
}

// trialOrder is the trial numbers of the sweep table's rows in dom, in order.
func trialOrder(dom string) string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr class="trial[a-z ]*" data-trial="([0-9]+)"`).FindAllStringSubmatch(dom, -1) {
		out = append(out, m[1])
	}
	return strings.Join(out, " ")
}

// svgOf is the SVG in dom that starts with attrs.
func svgOf(t *testing.T, dom, attrs string) string {
	t.Helper()
	i := strings.Index(dom, attrs)
	if i < 0 {
		t.Fatalf("the DOM has no chart with %s:\n%s", attrs, dom)
	}
	return dom[i : i+strings.Index(dom[i:], "</svg>")]
}
