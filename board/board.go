package board

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/earlystop"
)

//go:embed assets
var assets embed.FS

// Config is what New needs: Runs, Watch or both.
type Config struct {
	Runs []string // run directories, each holding (or about to hold) a metrics.jsonl
	// Watch are folders such as runs/, scanned again at every refresh for the runs in them (see
	// FindRuns): a run started after the board shows up on the next refresh, no restart.
	Watch []string
	// MaxRuns bounds the runs followed, given and found together (default 50): each costs a
	// tail and its series, so a folder filling with runs cannot grow the board without end. Runs
	// found past it are named on the page, not followed.
	MaxRuns int
	// MaxPoints bounds the points kept per series (default 1000): past it, decimation.
	MaxPoints int
	// ReadBudget bounds the bytes one refresh reads per run (default 32 MiB): a huge file is
	// caught up over several refreshes, each answered at once with what is read so far.
	ReadBudget int64
	// Refresh is how often the page asks for fresh content (default 2s; the page's own timer).
	Refresh time.Duration
	// Now is the clock, for the last-write age (default time.Now).
	Now func() time.Time
	// LoopbackHostOnly refuses (403) a request whose Host header is not localhost or a loopback
	// address: a web page elsewhere cannot then read the board through a DNS name rebound to
	// 127.0.0.1. For a board that listens on loopback only; nitro board sets it then.
	LoopbackHostOnly bool
}

// Board serves the runs' comparison page; see the package doc. Safe for concurrent use.
type Board struct {
	cfg      Config
	mu       sync.Mutex // serializes refreshes: each tail is read by one request at a time
	tails    []*tail    // Config.Runs, then the runs found in Config.Watch in the order found
	followed map[string]bool
	named    int // how many tails the names were chosen among
	mux      *http.ServeMux
	sweeps   []*sweepDir         // the sweep dirs found, in the order found
	trialOf  map[string]trialRef // a sweep trial's run dir: which trial it is, for its name
	relabel  bool                // a run dir became known as a trial: name the runs again
}

// New checks cfg and returns a Board. It opens nothing yet: each request reads what the runs
// appended since the last one.
func New(cfg Config) (*Board, error) {
	cfg.Runs, cfg.Watch = sweepsWatched(cfg.Runs, cfg.Watch)
	if len(cfg.Runs)+len(cfg.Watch) == 0 {
		return nil, errors.New("board: no run directories given: set Config.Runs or Config.Watch (e.g. nitro board runs/MLP runs/CNN, or nitro board runs)")
	}
	if cfg.MaxRuns == 0 {
		cfg.MaxRuns = max(defaultRuns, len(cfg.Runs))
	}
	if cfg.MaxRuns < len(cfg.Runs) {
		return nil, fmt.Errorf("board: Config.MaxRuns %d: fewer than the %d runs given; raise it or give fewer", cfg.MaxRuns, len(cfg.Runs))
	}
	if cfg.MaxPoints == 0 {
		cfg.MaxPoints = 1000
	}
	if cfg.MaxPoints < 2 {
		return nil, fmt.Errorf("board: Config.MaxPoints %d: at least 2 points per series", cfg.MaxPoints)
	}
	if cfg.ReadBudget == 0 {
		cfg.ReadBudget = 32 << 20
	}
	if cfg.ReadBudget < 0 {
		return nil, fmt.Errorf("board: Config.ReadBudget %d: must be positive", cfg.ReadBudget)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 2 * time.Second
	}
	if cfg.Refresh < 100*time.Millisecond {
		return nil, fmt.Errorf("board: Config.Refresh %v: at least 100ms", cfg.Refresh)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b := &Board{cfg: cfg, followed: map[string]bool{}, trialOf: map[string]trialRef{}}
	for _, dir := range cfg.Runs {
		b.followed[filepath.Clean(dir)] = true
		b.tails = append(b.tails, newTail(dir, "", cfg.MaxPoints))
	}
	sub, _ := fs.Sub(assets, "assets")
	b.mux = http.NewServeMux()
	b.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	b.mux.HandleFunc("GET /{$}", b.html(writePage))
	b.mux.HandleFunc("GET /content", b.html(writeContent))
	b.mux.HandleFunc("GET /api/runs", b.api)
	return b, nil
}

// runNames are the runs' folder names, or their paths where two folders share a name.
func runNames(dirs []string) []string {
	count := map[string]int{}
	for _, d := range dirs {
		count[filepath.Base(filepath.Clean(d))]++
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Base(filepath.Clean(d))
		if count[out[i]] > 1 {
			out[i] = filepath.Clean(d)
		}
	}
	return out
}

// ServeHTTP serves / (the page), /content (the page's body, which the page fetches to refresh),
// /api/runs (the same facts as JSON) and /assets/ (the embedded stylesheet and script).
func (b *Board) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.cfg.LoopbackHostOnly && !loopbackHost(r.Host) {
		http.Error(w, fmt.Sprintf("board: Host %q is not this machine's loopback name or address; open the board at http://127.0.0.1:<port>/", r.Host), http.StatusForbidden)
		return
	}
	b.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine only: localhost or a loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Run is one run's facts as /api/runs answers them.
type Run struct {
	Name           string            `json:"name"`
	Dir            string            `json:"dir"`
	Phase          string            `json:"phase"`
	Gone           bool              `json:"gone"`
	Epoch          int               `json:"epoch"`
	Step           int               `json:"step"`
	StepsPerSecond float64           `json:"steps_per_second"` // over the newest train lines' step_seconds
	StopReason     string            `json:"stop_reason"`      // the finish line's status; "" while running
	Best           string            `json:"best_checkpoint"`
	Lines          int               `json:"lines"`
	Malformed      int               `json:"malformed"`
	Errors         []string          `json:"errors"` // the newest malformed lines' reasons
	Pending        int               `json:"pending_bytes"`
	Behind         int64             `json:"unread_bytes"`
	LastWrite      time.Time         `json:"last_write"`
	Params         map[string]string `json:"params"` // one value per knob: see Overridden
	// Overridden names, per kept field, the other spellings of the same knob whose value the run
	// did not use (max_epochs: "MaxEpochs 2", the experiment's field a --max-epochs overrode).
	Overridden map[string]string  `json:"overridden,omitempty"`
	Train      map[string][]Point `json:"train"`    // per optimizer step
	Validate   map[string][]Point `json:"validate"` // per epoch, or per validation at its step (ValEvery)
	Data       map[string][]Point `json:"data"`     // the same
	Warnings   []string           `json:"warnings"`
	// ValEvery is the params line's val_every: the optimizer steps between a step-based run's
	// validations, whose Validate and Data points then have their step as X; 0 for a run
	// validated at epoch ends, whose points have their epoch.
	ValEvery int `json:"val_every"`
	// StepsPerEpoch is the first validate or data line's step over its epoch (0 before one), or
	// for a step-based run the step its first epoch ended at over that epoch: it places points
	// that have no epoch of their own on the epoch axis.
	StepsPerEpoch float64 `json:"steps_per_epoch"`
	Timed         bool    `json:"timed"` // its train lines carry step_seconds: the time axis has its points
}

// Snapshot refreshes every run and returns their facts: Config.Runs in the order given, then the
// runs found in Config.Watch in the order found.
func (b *Board) Snapshot() []Run {
	runs, _, _ := b.snapshot()
	return runs
}

// Sweeps refreshes the board and returns the sweeps found (folders holding a JournalFile among
// Config.Watch and below it), each with its trials ranked best first.
func (b *Board) Sweeps() []Sweep {
	_, sweeps, _ := b.snapshot()
	return sweeps
}

// snapshot is Snapshot plus the sweeps found and the board's own notes (the watched folders', the
// bounds').
func (b *Board) snapshot() ([]Run, []Sweep, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	notes := b.watch()
	out := make([]Run, len(b.tails))
	for i, t := range b.tails {
		t.refresh(b.cfg.ReadBudget)
		out[i] = t.snapshot()
	}
	return out, b.sweepViews(out), notes
}

func (t *tail) snapshot() Run {
	r := Run{Name: t.name, Dir: t.dir, Phase: t.phase(), Gone: t.st.gone, Epoch: t.st.epoch, Step: t.st.step,
		StepsPerSecond: t.st.speed(), StopReason: t.st.status, Best: t.best, Lines: t.st.lines,
		Malformed: t.st.malformed, Errors: append([]string(nil), t.st.errors...), Pending: len(t.pending),
		Behind: t.behind(), LastWrite: t.modTime,
		Train: points(t.st.train), Validate: points(t.st.val), Data: points(t.st.data),
		ValEvery: t.st.valEvery, StepsPerEpoch: t.st.stepsPerEpoch, Timed: t.st.timed}
	r.Params, r.Overridden = collapse(t.st.params)
	if t.st.readErr != "" {
		r.Warnings = append(r.Warnings, "cannot read "+MetricsFile+": "+t.st.readErr)
	}
	if n := t.st.malformed; n > 0 {
		// One sentence per file however many lines were skipped; the reasons are in Errors.
		lines := "lines"
		if n == 1 {
			lines = "line"
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: skipped %d malformed %s (first at line %d)", MetricsFile, n, lines, t.st.firstMalformed))
	}
	if r.Pending > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the last line is incomplete (%d bytes); it is read once its newline arrives", r.Pending))
	}
	if t.skip {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the last line is longer than %d bytes; it will be skipped", MaxLineBytes))
	}
	if r.Behind > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("still reading: %d bytes to go", r.Behind))
	}
	if t.st.droppedNames > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d values of metrics past the first %d names per context were not kept", t.st.droppedNames, maxSeries))
	}
	if t.st.droppedParams > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d config fields past the first %d were not kept", t.st.droppedParams, maxParams))
	}
	if t.st.gone {
		r.Warnings = append(r.Warnings, "the run directory is gone; what was read before is shown")
	}
	return r
}

func points(m map[string]*series) map[string][]Point {
	out := make(map[string][]Point, len(m))
	for k, s := range m {
		out[k] = s.points()
	}
	return out
}

// bestCheckpoint names the manifest's best scored checkpoint (by the mode its metric's name
// calls for: lower losses, higher accuracies), or its newest when none is scored.
func bestCheckpoint(dir string) string {
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil {
		return "unreadable manifest: " + err.Error()
	}
	if len(entries) == 0 {
		return ""
	}
	best := -1
	for i, e := range entries {
		if e.Score == nil {
			continue
		}
		mode, _ := earlystop.ModeOf(e.Metric)
		if best < 0 || (mode == "max" && *e.Score > *entries[best].Score) || (mode != "max" && *e.Score < *entries[best].Score) {
			best = i
		}
	}
	if best < 0 {
		e := entries[len(entries)-1]
		return fmt.Sprintf("%s (newest, unscored; epoch %d)", e.File, e.Epoch)
	}
	e := entries[best]
	return fmt.Sprintf("%s (%s %.4g, epoch %d)", e.File, e.Metric, *e.Score, e.Epoch)
}

func (b *Board) api(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	runs, sweeps, notes := b.snapshot()
	_ = enc.Encode(map[string]any{"runs": runs, "sweeps": sweeps, "notes": notes})
}

// html answers with what write renders from a fresh snapshot, as the request's query asks (see
// parseView): the whole page or its body.
func (b *Board) html(write func(*strings.Builder, page)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := parseView(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		p := page{view: v, cfg: b.cfg}
		p.runs, p.sweeps, p.notes = b.snapshot()
		var sb strings.Builder
		write(&sb, p)
		_, _ = w.Write([]byte(sb.String()))
	}
}
