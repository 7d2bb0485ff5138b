package promexport

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/monitors"
)

// fakeClock is the exporter's clock in tests: time moves only when advanced.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// start runs an exporter on a free loopback port with a fake clock; it is closed at cleanup.
func start(t *testing.T, opts Options) (*Exporter, *fakeClock) {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	e.now = clock.now
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e, clock
}

// scrape reads /metrics over loopback, without keep-alive, and parses the text format.
type scraped map[string]*dto.MetricFamily

func scrape(t *testing.T, addr string) scraped {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// lookup finds the gauge name{labels}; labels are name, value pairs.
func (s scraped) lookup(name string, labels ...string) (float64, bool) {
	fam, ok := s[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(labels)/2 {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		if fam.GetType() == dto.MetricType_COUNTER {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// wantTypes checks Prometheus's naming conventions on every family served: a counter's name
// ends in _total, and a name ending in _total is a counter.
func (s scraped) wantTypes(t *testing.T) {
	t.Helper()
	for name, fam := range s {
		if counter := fam.GetType() == dto.MetricType_COUNTER; counter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is TYPE %s: a counter, and only a counter, is named *_total", name, fam.GetType())
		}
	}
}

func (s scraped) want(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := s.lookup(name, labels...)
	if !ok {
		t.Errorf("%s%v: absent", name, labels)
		return
	}
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// wantPhase checks that nitro_phase is 1 for phase and 0 for every other known leaf.
func (s scraped) wantPhase(t *testing.T, phase string) {
	t.Helper()
	for _, p := range knownPhases {
		v := 0.0
		if phaseLabel(p) == phase {
			v = 1
		}
		s.want(t, v, "nitro_phase", "phase", phaseLabel(p))
	}
}

func train(step, epoch int, loss float64) logjson.Metrics {
	return logjson.Metrics{Step: step, Epoch: epoch, Context: logjson.ContextTrain, Values: map[string]float64{"loss": loss}}
}

// A short run driven the way core drives it: a Tracker publishing transitions to the exporter
// as a monitor, and the same exporter as the run's logger.
func TestShortRun(t *testing.T) {
	var hits, misses atomic.Uint64
	hits.Store(3)
	misses.Store(2)
	e, clock := start(t, Options{CacheStats: func() (uint64, uint64) { return hits.Load(), misses.Load() }})
	tr := monitors.NewTracker(monitors.TrackerOptions{Logger: e, Warn: func(msg string) { t.Error(msg) }})
	tr.Register(e)
	counter0 := monitors.ProgressCounter()

	tr.SetPhase(monitors.GradientCompiling{}, monitors.Info{})
	clock.advance(2 * time.Second)
	tr.SetStepsPerEpoch(8)
	tr.SetProgress(1, 0)
	tr.SetPhase(monitors.TrainStepping{}, monitors.Info{})
	for s := 1; s <= 8; s++ {
		if s == 1 {
			clock.advance(time.Second) // the first step is slow
		} else {
			clock.advance(250 * time.Millisecond)
		}
		loss := 1 / float64(s)
		tr.SetProgress(1, s)
		tr.SetLoss(loss)
		tr.Tick()
		if err := e.LogMetrics(train(s, 1, loss)); err != nil {
			t.Fatal(err)
		}
	}

	mid := scrape(t, e.Addr())
	mid.wantPhase(t, "TrainStepping")
	mid.want(t, 8, "nitro_step")
	mid.want(t, 1, "nitro_epoch")
	mid.want(t, 0.125, "nitro_loss")
	mid.want(t, 7/1.75, "nitro_steps_per_second") // steps 1..8 over the train lines' 1.75 s
	mid.wantTypes(t)
	mid.want(t, float64(counter0+8), "nitro_progress_total")
	mid.want(t, 3, "nitro_compile_cache_hits_total")
	mid.want(t, 2, "nitro_compile_cache_misses_total")
	for _, s := range statuses {
		mid.want(t, 0, "nitro_run_status", "status", string(s))
	}

	tr.SetPhase(monitors.EvalStepping{}, monitors.Info{})
	for range 3 {
		tr.Tick() // eval batches
	}
	clock.advance(time.Second)
	_ = e.LogMetrics(logjson.Metrics{Step: 8, Epoch: 1, Context: logjson.ContextValidate,
		Values: map[string]float64{"val_accuracy": 0.9, "val_loss": 0.3}})
	_ = e.LogMetrics(logjson.Metrics{Step: 8, Epoch: 1, Context: logjson.ContextData,
		Values: map[string]float64{"data_wait_frac": 0.05}})
	tr.SetProgress(2, 8)
	tr.SetPhase(monitors.TrainStepping{}, monitors.Info{Metrics: map[string]float64{"top5": 0.99, "val_accuracy": 0.9}})
	hits.Store(5)

	epoch2 := scrape(t, e.Addr())
	epoch2.wantPhase(t, "TrainStepping")
	epoch2.want(t, 8, "nitro_step")
	epoch2.want(t, 2, "nitro_epoch")
	epoch2.want(t, 0.125, "nitro_loss")
	epoch2.want(t, 8/2.75, "nitro_steps_per_second") // the whole TrainStepping stretch: 8 steps in 2.75 s
	epoch2.want(t, 8, "nitro_steps_per_epoch")
	epoch2.want(t, 0.9, "nitro_validation_metric", "metric", "val_accuracy")
	epoch2.want(t, 0.3, "nitro_validation_metric", "metric", "val_loss")
	epoch2.want(t, 0.99, "nitro_validation_metric", "metric", "val_top5")
	epoch2.want(t, 0.05, "nitro_data_wait_fraction")
	epoch2.want(t, float64(counter0+11), "nitro_progress_total")
	epoch2.want(t, 5, "nitro_compile_cache_hits_total") // read at scrape time
	if n := len(epoch2["nitro_validation_metric"].GetMetric()); n != 3 {
		t.Errorf("nitro_validation_metric has %d series, want 3 (Info.Metrics names join the val_* ones)", n)
	}

	tr.SetPhase(monitors.Done{}, monitors.Info{})
	if err := e.Finish(logjson.StatusCompleted); err != nil {
		t.Fatal(err)
	}
	if err := e.Finish(logjson.StatusError); err != nil {
		t.Fatal(err)
	}
	end := scrape(t, e.Addr())
	end.wantPhase(t, "Done")
	end.want(t, 1, "nitro_run_status", "status", "completed")
	for _, s := range []string{"early_stop", "requested", "error"} {
		end.want(t, 0, "nitro_run_status", "status", s)
	}
}

func TestFreshExporter(t *testing.T) {
	e, _ := start(t, Options{})
	s := scrape(t, e.Addr())
	for _, p := range knownPhases {
		s.want(t, 0, "nitro_phase", "phase", phaseLabel(p)) // nothing observed yet
	}
	for _, name := range []string{"nitro_step", "nitro_epoch", "nitro_loss", "nitro_steps_per_second", "nitro_data_wait_fraction"} {
		s.want(t, 0, name)
	}
	s.want(t, float64(monitors.ProgressCounter()), "nitro_progress_total") // no run yet: the process counter
	for _, name := range []string{"nitro_compile_cache_hits_total", "nitro_compile_cache_misses_total", "nitro_validation_metric"} {
		if _, ok := s[name]; ok {
			t.Errorf("%s present without a source", name)
		}
	}
	for name := range s {
		if !strings.HasPrefix(name, "nitro_") {
			t.Errorf("unexpected family %s on a fresh registry", name)
		}
	}
}

// Steps/s from transitions alone (a monitor without the logger): the mean rate of each
// stretch of TrainStepping; other stretches and stretches that did not advance leave it.
func TestStepsPerSecondFromTransitions(t *testing.T) {
	e, clock := start(t, Options{})
	at := func(epoch, step int) monitors.Progress {
		return monitors.Progress{Epoch: epoch, Step: step, Started: true}
	}
	_ = e.Observe(monitors.TrainStepping{}, at(1, 0), monitors.Info{})
	clock.advance(4 * time.Second)
	_ = e.Observe(monitors.EvalStepping{}, at(1, 20), monitors.Info{})
	s := scrape(t, e.Addr())
	s.want(t, 5, "nitro_steps_per_second")
	s.want(t, 20, "nitro_step")
	s.wantPhase(t, "EvalStepping")

	clock.advance(10 * time.Second) // eval time is not train time
	_ = e.Observe(monitors.TrainStepping{}, at(2, 20), monitors.Info{})
	clock.advance(time.Second)
	_ = e.Observe(monitors.GradientCompiling{}, at(2, 30), monitors.Info{}) // a recompile mid-epoch
	clock.advance(time.Minute)
	_ = e.Observe(monitors.TrainStepping{}, at(2, 30), monitors.Info{})
	s = scrape(t, e.Addr())
	s.want(t, 10, "nitro_steps_per_second")
	s.want(t, 2, "nitro_epoch")

	clock.advance(time.Second)
	_ = e.Observe(monitors.Failed{Err: errors.New("boom")}, at(2, 30), monitors.Info{}) // no step taken
	s = scrape(t, e.Addr())
	s.want(t, 10, "nitro_steps_per_second")
	s.wantPhase(t, "Failed")
}

// Steps/s from train lines: a window of the latest lines of the current stretch, so the gap
// of an evaluation between two epochs never drags it down.
func TestStepsPerSecondFromTrainLines(t *testing.T) {
	e, clock := start(t, Options{})
	log := func(step int) {
		t.Helper()
		if err := e.LogMetrics(train(step, 1, 0.5)); err != nil {
			t.Fatal(err)
		}
	}
	log(1)
	if v, _ := scrape(t, e.Addr()).lookup("nitro_steps_per_second"); v != 0 {
		t.Errorf("one line gave a rate %v", v)
	}
	for s := 2; s <= 5; s++ {
		clock.advance(500 * time.Millisecond)
		log(s)
	}
	scrape(t, e.Addr()).want(t, 2, "nitro_steps_per_second")

	// LogEvery thins the lines: each covers 4 steps.
	for s := 9; s <= 21; s += 4 {
		clock.advance(time.Second)
		log(s)
	}
	scrape(t, e.Addr()).want(t, 20.0/6, "nitro_steps_per_second") // steps 1..21 over 6 s

	// A long window keeps only the newest rateWindow lines.
	for s := 22; s < 22+2*rateWindow; s++ {
		clock.advance(100 * time.Millisecond)
		log(s)
	}
	scrape(t, e.Addr()).want(t, 10, "nitro_steps_per_second")

	// A transition starts a new window: an eval minute between two lines is not counted.
	last := 22 + 2*rateWindow - 1
	_ = e.Observe(monitors.EvalStepping{}, monitors.Progress{}, monitors.Info{})
	clock.advance(time.Minute)
	_ = e.Observe(monitors.TrainStepping{}, monitors.Progress{}, monitors.Info{})
	clock.advance(250 * time.Millisecond)
	log(last + 1)
	clock.advance(250 * time.Millisecond)
	log(last + 2)
	clock.advance(250 * time.Millisecond)
	log(last + 2) // a repeated step adds nothing
	scrape(t, e.Addr()).want(t, 4, "nitro_steps_per_second")

	// A step going backwards (a new run) starts over too.
	clock.advance(time.Hour)
	log(1)
	clock.advance(time.Second)
	log(3)
	s := scrape(t, e.Addr())
	s.want(t, 2, "nitro_steps_per_second")
	s.want(t, 3, "nitro_step")
}

// Phases are labelled by leaf type: Failed's error text never reaches a label, and a leaf this
// package does not know gets a series of its own.
func TestPhaseLabels(t *testing.T) {
	type Paused struct{ monitors.Starting } // a leaf unknown to this package
	e, _ := start(t, Options{})
	_ = e.Observe(monitors.Failed{Err: errors.New("out of memory at step 7")}, monitors.Progress{}, monitors.Info{})
	s := scrape(t, e.Addr())
	s.wantPhase(t, "Failed")
	if n, want := len(s["nitro_phase"].GetMetric()), len(knownPhases); n != want {
		t.Errorf("nitro_phase has %d series, want %d", n, want)
	}
	_ = e.Observe(Paused{}, monitors.Progress{}, monitors.Info{})
	_ = e.Observe(&monitors.Done{}, monitors.Progress{}, monitors.Info{})
	s = scrape(t, e.Addr())
	s.wantPhase(t, "Done")
	s.want(t, 0, "nitro_phase", "phase", "Paused")
	_ = e.Observe(monitors.Repl{}, monitors.Progress{}, monitors.Info{})
	scrape(t, e.Addr()).wantPhase(t, "Repl")
	if err := e.Observe(nil, monitors.Progress{}, monitors.Info{}); err != nil {
		t.Error(err)
	}
}

func TestLoggerContract(t *testing.T) {
	e, _ := start(t, Options{})
	if err := e.LogParams(map[string]any{"lr": 0.1}); err != nil {
		t.Error(err)
	}
	if err := e.LogOther("binding_report", "x"); err != nil {
		t.Error(err)
	}
	if err := e.LogMetrics(logjson.Metrics{Context: "custom", Values: map[string]float64{"x": 1}}); err != nil {
		t.Error(err)
	}
	if err := e.Finish("crashed"); !errors.Is(err, logjson.ErrUnknownStatus) {
		t.Errorf("Finish(crashed) = %v, want ErrUnknownStatus", err)
	}
	if err := e.Finish(logjson.StatusError); err != nil {
		t.Fatal(err)
	}
	_ = e.Finish(logjson.StatusCompleted) // a deferred completed never overwrites the error
	s := scrape(t, e.Addr())
	s.want(t, 1, "nitro_run_status", "status", "error")
	s.want(t, 0, "nitro_run_status", "status", "completed")
	for name := range s {
		if strings.Contains(name, "lr") || strings.Contains(name, "custom") || strings.Contains(name, "binding") {
			t.Errorf("unexpected family %s", name)
		}
	}
}

// A CacheStats that panics costs those two series, not the scrape or the process.
func TestCacheStatsPanic(t *testing.T) {
	e, _ := start(t, Options{CacheStats: func() (uint64, uint64) { panic("cache gone") }})
	_ = e.LogMetrics(train(4, 1, 0.5))
	s := scrape(t, e.Addr())
	s.want(t, 4, "nitro_step")
	if _, ok := s["nitro_compile_cache_hits_total"]; ok {
		t.Error("nitro_compile_cache_hits_total served although CacheStats panicked")
	}
}

// Close waits for a scrape in flight, then the port no longer accepts, no goroutine is left,
// and a second Close is a no-op.
func TestClose(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	e, err := New(Options{Addr: "127.0.0.1:0", CacheStats: func() (uint64, uint64) {
		once.Do(func() { close(entered); <-release })
		return 1, 1
	}})
	if err != nil {
		t.Fatal(err)
	}
	addr := e.Addr()
	scraped := make(chan int, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			scraped <- -1
			return
		}
		resp.Body.Close()
		scraped <- resp.StatusCode
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	// Close has begun once the port refuses connections (the listener closes first); from then
	// on, returning before the scrape is released would be the bug.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections a minute after Close began", addr)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a scrape was in flight", err)
	default:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if code := <-scraped; code != http.StatusOK {
		t.Errorf("the scrape in flight at Close got %d, want 200", code)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", addr)
	}
	goleak.VerifyNone(t)
	// Events after Close are accepted, unserved.
	if err := e.LogMetrics(train(1, 1, 1)); err != nil {
		t.Error(err)
	}
}

func TestBadAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	reg := prometheus.NewRegistry()
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1", "", busy.Addr().String()} {
		e, err := New(Options{Addr: addr, Registry: reg})
		if err == nil {
			e.Close()
			t.Errorf("New(%q) succeeded", addr)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", addr)) {
			t.Errorf("New(%q): error %q does not name the address", addr, err)
		}
	}
	// The failed attempts left the registry clean.
	e, err := New(Options{Addr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		t.Fatalf("New on the registry the failures used: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// A caller's registry: its own collectors are served alongside, a second exporter on it is
// refused, and Close hands it back clean.
func TestCallerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	own := prometheus.NewGauge(prometheus.GaugeOpts{Name: "app_ready", Help: "The caller's own gauge."})
	own.Set(1)
	reg.MustRegister(own)
	e, _ := start(t, Options{Registry: reg})
	if e.Registry() != reg {
		t.Error("Registry() is not the caller's registry")
	}
	s := scrape(t, e.Addr())
	s.want(t, 1, "app_ready")
	s.want(t, 0, "nitro_step")

	if e2, err := New(Options{Addr: "127.0.0.1:0", Registry: reg}); err == nil {
		e2.Close()
		t.Error("a second exporter on the same registry was accepted")
	} else if !strings.Contains(err.Error(), "registering") {
		t.Errorf("unexpected error: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].GetName() != "app_ready" {
		t.Errorf("after Close the registry holds %d families, want only app_ready", len(fams))
	}
	e3, err := New(Options{Addr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		t.Fatalf("New after Close on the same registry: %v", err)
	}
	if err := e3.Close(); err != nil {
		t.Fatal(err)
	}
}

// Events from several goroutines while scrapes run (meaningful under -race).
func TestConcurrentUse(t *testing.T) {
	e, err := New(Options{Addr: "127.0.0.1:0", CacheStats: func() (uint64, uint64) { return 1, 2 }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tr := monitors.NewTracker(monitors.TrackerOptions{Warn: func(msg string) { t.Error(msg) }})
	tr.Register(e)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			tr.SetProgress(i/50+1, i)
			if i%2 == 0 {
				tr.SetPhase(monitors.TrainStepping{}, monitors.Info{})
			} else {
				tr.SetPhase(monitors.EvalStepping{}, monitors.Info{Metrics: map[string]float64{"acc": float64(i)}})
			}
		}
	})
	wg.Go(func() {
		for i := range 200 {
			_ = e.LogMetrics(train(i, 1, float64(i)))
			_ = e.LogMetrics(logjson.Metrics{Context: logjson.ContextValidate, Values: map[string]float64{"val_loss": float64(i)}})
			_ = e.LogMetrics(logjson.Metrics{Context: logjson.ContextData, Values: map[string]float64{"data_wait_frac": 0.1}})
		}
	})
	wg.Go(func() {
		for range 5 {
			_ = e.Finish(logjson.StatusCompleted)
		}
	})
	for range 5 {
		scrape(t, e.Addr())
	}
	wg.Wait()
	s := scrape(t, e.Addr())
	s.want(t, 199, "nitro_validation_metric", "metric", "val_loss")
	s.want(t, 199, "nitro_validation_metric", "metric", "val_acc")
	s.wantPhase(t, "EvalStepping")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
