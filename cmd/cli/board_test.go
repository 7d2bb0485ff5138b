package cli_test

import (
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/monitors"
)

// chromium finds a headless-capable Chromium on $PATH, or stops the test (a failure under CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	prereq.Chromium.Absent(t, "none of chromium, chromium-browser, google-chrome on $PATH")
	return ""
}

// browse loads url in headless Chromium; with shot set it saves a screenshot there (1280x900
// unless extra gives a --window-size), else it returns the DOM after the page's load (scripts
// run). A browser that fails is Broken.
func browse(t *testing.T, bin, url, shot string, extra ...string) string {
	t.Helper()
	dom, err := chromiumLoad(bin, t.TempDir(), url, shot, extra...)
	if err != nil {
		prereq.Chromium.Broken(t, err)
	}
	return dom
}

// chromiumLoad is browse's work, safe off the test's goroutine (it never stops the test).
func chromiumLoad(bin, profile, url, shot string, extra ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--user-data-dir=" + profile}
	if shot != "" {
		args = append(args, "--screenshot="+shot, "--hide-scrollbars")
		if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--window-size=") }) {
			args = append(args, "--window-size=1280,900")
		}
	} else {
		args = append(args, "--dump-dom")
	}
	cmd := exec.CommandContext(ctx, bin, append(append(args, extra...), url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", bin, err, stderr.String())
	}
	return string(out), nil
}

// lossPoints is the data-points count of run's polyline on the train loss chart in dom.
func lossPoints(t *testing.T, dom, run string) int {
	t.Helper()
	i := strings.Index(dom, `data-context="train" data-metric="loss"`)
	if i < 0 {
		t.Fatalf("no train loss chart in the DOM:\n%s", dom)
	}
	chart := dom[i:]
	chart = chart[:strings.Index(chart, "</svg>")]
	m := regexp.MustCompile(`data-run="` + regexp.QuoteMeta(run) + `" data-points="([0-9]+)"`).FindStringSubmatch(chart)
	if m == nil {
		t.Fatalf("no loss polyline for run %s:\n%s", run, chart)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestBoardInChromium: `nitro board` over loopback watches a folder holding a finished run; a
// live run started there later appears without a restart. Headless Chromium loads the page at the
// live run's first and second validations (the run waits in its monitor meanwhile), and the DOM
// names both runs, shows the live one training and the finished one completed, lists the
// differing config fields once per knob, draws the per-digit accuracies as one family chart with
// a legend, and has more loss points on the second load. Screenshots of the page mid-run
// (board.png, 1280x900) and of the whole page after it (board-families.png, 1280x1600: the
// validation charts, the per-digit family with its legend) are saved to the test's artifact folder
// (go test -artifacts -outputdir DIR keeps them; $NITRO_BOARD_SCREENSHOT names the first instead). A last load
// after the run, with a view asked for in the address, lets the page's refresh script run and
// checks the view outlives the refresh.
func TestBoardInChromium(t *testing.T) {
	bin := chromium(t)
	root := t.TempDir()
	done, live := filepath.Join(root, "lr-high"), filepath.Join(root, "lr-low")
	if code, out, errs := runCLI(append(append([]string{"train", "mnist-mlp"}, fast...), "--set", "LearningRate=0.03", "--run-dir", done)...); code != 0 {
		t.Fatalf("train %s: exit %d: %s\n%s", done, code, errs, out)
	}

	var bout, berr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	boardDone := make(chan int, 1)
	go func() {
		boardDone <- cli.MainContext(ctx, []string{"board", root, "--addr", "127.0.0.1:0", "--refresh", "500ms"}, &bout, &berr)
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

	if got := getBody(t, url+"api/runs"); strings.Contains(got, `"lr-low"`) || !strings.Contains(got, `"name": "lr-high"`) {
		t.Fatalf("before the live run starts the board should follow lr-high only:\n%s", got)
	}
	shot := os.Getenv("NITRO_BOARD_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.ArtifactDir(), "board.png")
	}
	familyShot := filepath.Join(filepath.Dir(shot), "board-families.png")
	var (
		mu      sync.Mutex
		doms    []string
		loadErr error
	)
	h := monitors.RegisterFunc(func(p monitors.Phase, at monitors.Progress, _ monitors.Info) error {
		if _, ok := p.(monitors.EvalStepping); !ok || !at.Started || at.Step == 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		// A validation is entered again after its checkpoint write: load once per epoch. The
		// run waits here meanwhile; the monitor runs on the training goroutine, so it reports
		// a failure for the test to raise, never stopping the test itself.
		if loadErr == nil && len(doms) < 2 && at.Epoch == len(doms)+1 {
			var dom string
			if dom, loadErr = chromiumLoad(bin, t.TempDir(), url, ""); loadErr == nil {
				doms = append(doms, dom)
			}
			if len(doms) == 2 {
				_, loadErr = chromiumLoad(bin, t.TempDir(), url, shot)
			}
		}
		return nil
	})
	t.Cleanup(h.Unregister)
	args := append(append([]string{"train", "mnist-mlp"}, fast...), "--max-epochs", "3", "--run-dir", live)
	args = slicesDelete(args, "--no-checkpoints")
	code, out, errs := runCLI(args...)
	h.Unregister()
	if code != 0 {
		t.Fatalf("train %s: exit %d: %s\n%s", live, code, errs, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if loadErr != nil {
		prereq.Chromium.Broken(t, loadErr)
	}
	if len(doms) != 2 {
		t.Fatalf("the page was loaded %d times during the run, want 2", len(doms))
	}
	for i, dom := range doms {
		for _, w := range []string{`data-run="lr-high"`, `data-run="lr-low"`, `data-field="learning_rate"`, "completed",
			`data-field="max_epochs"><td>max_epochs</td><td title="the run used this; also logged: MaxEpochs 2">1</td><td title="the run used this; also logged: MaxEpochs 2">3</td>`,
			`data-context="validate" data-metric="val_accuracy_*"`, `>val_accuracy_* (10)</text>`, `<figcaption class="legend">`,
			`data-run="lr-high" data-points="1" data-member="val_accuracy_9" stroke=`} {
			if !strings.Contains(dom, w) {
				t.Errorf("load %d: the DOM lacks %q", i+1, w)
			}
		}
		for _, w := range []string{`data-field="MaxEpochs"`, `data-field="LearningRate"`, `data-metric="val_accuracy_3"`} {
			if strings.Contains(dom, w) {
				t.Errorf("load %d: the DOM has %q: a knob's other spelling, or a family member's own chart", i+1, w)
			}
		}
		if !regexp.MustCompile(`data-run="lr-low"><td>.*?</td><td[^>]*>lr-low</td><td class="phase">training epoch ` + strconv.Itoa(i+1) + `<`).MatchString(dom) {
			t.Errorf("load %d: the live run's row does not say training epoch %d:\n%s", i+1, i+1, dom)
		}
	}
	first, second := lossPoints(t, doms[0], "lr-low"), lossPoints(t, doms[1], "lr-low")
	if first < 2 || second <= first {
		t.Errorf("the live run's loss curve did not grow between loads: %d then %d points", first, second)
	}
	if !strings.Contains(doms[1], "epoch-0001-step-") {
		t.Errorf("the second load should name epoch 1's checkpoint as the best so far")
	}
	// After the run, with virtual time let run past a refresh: the page's script has fetched
	// /content with the view in the address and swapped it in (its status line says so): the
	// live run is finished, lr-high still hidden, the curves smoothed on the epoch axis.
	after := browse(t, bin, url+"?x=epoch&smooth=0.6&hide=lr-high", "", "--virtual-time-budget=3000")
	if !strings.Contains(after, `<span id="status">updated `) || !regexp.MustCompile(`lr-low</td><td class="phase">finished<`).MatchString(after) {
		t.Errorf("after the run, the refreshed page should say updated and finished:\n%s", after)
	}
	for _, w := range []string{`<tr class="run hidden" data-run="lr-high">`, `<polyline class="series smoothed" data-run="lr-low"`, `>epoch; smoothed 0.6</text>`} {
		if !strings.Contains(after, w) {
			t.Errorf("after a refresh the view asked for should hold: the DOM lacks %q", w)
		}
	}
	if strings.Contains(after, `<polyline class="series raw" data-run="lr-high"`) {
		t.Errorf("after a refresh, the hidden run lr-high is drawn")
	}
	browse(t, bin, url, familyShot, "--window-size=1280,1600") // tall enough for the validation charts
	t.Logf("loss points: %d, then %d; screenshots: %s, %s", first, second, shot, familyShot)
	for path, height := range map[string]int{shot: 900, familyShot: 1600} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		img, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || img.Width != 1280 || img.Height != height {
			t.Fatalf("screenshot %s: %+v, %v; want a 1280x%d PNG", path, img, err, height)
		}
	}
}

// getBody is url's body over plain HTTP.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func slicesDelete(args []string, drop string) []string {
	var out []string
	for _, a := range args {
		if a != drop {
			out = append(out, a)
		}
	}
	return out
}

// TestBoardCommandErrors: board without a run directory, with an empty --addr, with a file for a
// run directory, with a refresh it cannot use, or with fewer --max-runs than runs given is
// refused naming the fix; its run directories complete as folders.
func TestBoardCommandErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "metrics.jsonl")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"board"}, "board needs one or more run directories"},
		{[]string{"board", "runs/x", "--addr", ""}, "--addr: empty value"},
		{[]string{"board", file}, "is a file; give its run directory"},
		{[]string{"board", "runs/x", "--refresh", "1ms"}, "Refresh 1ms: at least 100ms (flags --refresh, --max-points, --max-runs)"},
		{[]string{"board", "runs/x", "runs/y", "--max-runs", "1"}, "--max-runs 1: 2 runs given; raise it (e.g. --max-runs 50)"},
		{[]string{"board", "runs/x", "--refresh", "0"}, "--refresh 0s: the page's refresh period is positive"},
		{[]string{"board", "runs/x", "--max-points", "0"}, "--max-points 0: at least 2 points per curve"},
		{[]string{"board", "runs/x", "--addr", "127.0.0.1:-1"}, "--addr 127.0.0.1:-1"},
	} {
		code, _, errs := runCLI(c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, errs, c.want)
		}
	}
	if _, out, _ := runCLI("__complete", "board", ""); !strings.Contains(out, ":16") {
		t.Errorf("board's arguments should complete as folders (directive 16): %q", out)
	}
}
