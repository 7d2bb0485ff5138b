package core_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/earlystop"
	"github.com/nitro-go/nitro/logjson"
)

// TestEarlyStoppingDefaults: DefaultEarlyStopping is val_loss, min, patience 5, min_delta 1e-4;
// a bare experiment does not stop early; a literal that names no metric is refused at setup
// naming the defaults' constructor.
func TestEarlyStoppingDefaults(t *testing.T) {
	d := earlystop.Default()
	if d.Metric != "val_loss" || d.Mode != "min" || d.Patience != 5 || d.MinDelta != 1e-4 {
		t.Errorf("DefaultEarlyStopping() = %+v, want val_loss min 5 1e-4", *d)
	}
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(3), core.WithoutCheckpoints())...)
	if n.EarlyStopper() != nil {
		t.Errorf("a bare experiment has an early stopper %T", n.EarlyStopper())
	}
	coretest.Train(t, n)
	if n.Epoch() != 3 || n.StopReason() != core.StopCompleted {
		t.Errorf("bare experiment: epoch %d stop %q, want 3 completed", n.Epoch(), n.StopReason())
	}
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithEarlyStopper(&earlystop.EarlyStopping{Patience: 3})),
		"WithEarlyStopper: no metric", "earlystop.Default()", "val_loss, min, patience 5, min_delta 0.0001")
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithEarlyStopper(&earlystop.EarlyStopping{Metric: "val_loss", Mode: "down"})), `mode "down"`)
	// The policy's own behaviour is package earlystop's (its tests); the option names itself and
	// offers the defaults.
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithEarlyStopping("", "min", 1, 0)), "WithEarlyStopping: no metric", "earlystop.Default()")
}

// TestEarlyStopLegacyPolicyType: a record written while the built-in policy was defined in core
// names its type *earlystop.EarlyStopping; a resume takes that state as the built-in's, so an
// early-stopped run stays stopped instead of counting afresh.
func TestEarlyStopLegacyPolicyType(t *testing.T) {
	dir := t.TempDir()
	es := core.WithEarlyStopping("val_loss", "min", 2, 1e9) // no epoch improves by 1e9: stops after 3
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), es)...)
	coretest.Train(t, n)
	rec := must(checkpoint.Read(n.LastCheckpoint()))
	var ctl map[string]json.RawMessage
	if err := json.Unmarshal(rec.Control, &ctl); err != nil {
		t.Fatal(err)
	}
	if got := string(ctl["early_stopping_type"]); got != `"*earlystop.EarlyStopping"` {
		t.Fatalf("recorded policy type %s, want the built-in's Go type", got)
	}
	ctl["early_stopping_type"] = json.RawMessage(`"*earlystop.EarlyStopping"`)
	rewriteControl(t, n.LastCheckpoint(), string(must(json.Marshal(ctl))))
	con := &core.MemoryConsole{}
	again := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithResume(n.LastCheckpoint()), core.WithConsole(con), es)...)
	coretest.Train(t, again)
	if again.StopReason() != core.StopEarly || len(again.History()) != 0 {
		t.Errorf("legacy record: stop %q, %d epochs trained; want early_stop, none (notices %q)", again.StopReason(), len(again.History()), con.Notices)
	}
	if slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "starts afresh") }) {
		t.Errorf("notices %q: the legacy state was dropped", con.Notices)
	}
}

// StopsItself declares its stopping rule: every run of it stops the same way.
type StopsItself struct {
	coretest.Reg
	Rule  *earlystop.EarlyStopping
	calls int
}

func (e *StopsItself) EarlyStop() earlystop.Policy {
	e.calls++
	if e.Rule == nil {
		return nil
	}
	return e.Rule
}

// WrongStop has an EarlyStop method the hook cannot use (it returns the concrete type).
type WrongStop struct{ coretest.Reg }

func (*WrongStop) EarlyStop() *earlystop.EarlyStopping { return earlystop.Default() }

// TestEarlyStopHook: the experiment's EarlyStop is the run's rule (called once, copied, so the
// value it returns keeps no run's progress); the run's WithEarlyStopping or WithEarlyStopper wins
// (nil: none); an EarlyStop of another signature is refused rather than silently unused.
func TestEarlyStopHook(t *testing.T) {
	never := &earlystop.EarlyStopping{Metric: "val_loss", Mode: "min", Patience: 2, MinDelta: 1e9} // nothing improves by 1e9
	e := &StopsItself{Rule: never}
	n := coretest.New(t, e, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithoutCheckpoints())...)
	coretest.Train(t, n)
	if n.StopReason() != core.StopEarly || n.Epoch() != 3 || e.calls != 1 {
		t.Errorf("hook's rule: stop %q after %d epochs, EarlyStop called %d times; want early_stop after 3, called once", n.StopReason(), n.Epoch(), e.calls)
	}
	if es, ok := n.EarlyStopper().(*earlystop.EarlyStopping); !ok || es == never || !es.Exhausted() {
		t.Errorf("the run's rule %T (same value as the hook's: %v): want the run's own exhausted copy", n.EarlyStopper(), es == never)
	}
	if _, seen := never.Best(); seen {
		t.Error("the hook's EarlyStopping value carries the run's progress")
	}
	// The same value again: a fresh count, the same stop.
	again := coretest.New(t, &StopsItself{Rule: never}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithoutCheckpoints())...)
	coretest.Train(t, again)
	if again.Epoch() != 3 {
		t.Errorf("a second run with the same EarlyStopping value stopped after %d epochs, want 3", again.Epoch())
	}
	// Defaults through the hook.
	d := coretest.New(t, &StopsItself{Rule: earlystop.Default()}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithoutCheckpoints())...)
	if es, ok := d.EarlyStopper().(*earlystop.EarlyStopping); !ok || es.Metric != "val_loss" || es.Patience != 5 || es.MinDelta != 1e-4 {
		t.Errorf("hook returning DefaultEarlyStopping: run's rule %+v", d.EarlyStopper())
	}
	// The run's options win.
	off := coretest.New(t, &StopsItself{Rule: never}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(4), core.WithoutCheckpoints(), core.WithEarlyStopper(nil))...)
	coretest.Train(t, off)
	if off.EarlyStopper() != nil || off.Epoch() != 4 {
		t.Errorf("WithEarlyStopper(nil): rule %T, %d epochs; want none, 4", off.EarlyStopper(), off.Epoch())
	}
	over := coretest.New(t, &StopsItself{Rule: never}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithoutCheckpoints(), core.WithEarlyStopping("val_loss", "min", 4, 1e9))...)
	coretest.Train(t, over)
	if over.Epoch() != 5 {
		t.Errorf("WithEarlyStopping patience 4 over the hook's 2: stopped after %d epochs, want 5", over.Epoch())
	}
	if n := coretest.New(t, &StopsItself{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithoutCheckpoints())...); n.EarlyStopper() != nil {
		t.Errorf("EarlyStop returning nil: rule %T, want none", n.EarlyStopper())
	}
	coretest.WantErr(t, newErr(t, &StopsItself{Rule: &earlystop.EarlyStopping{Metric: "val_acc", Mode: "max"}}, coretest.Data(t, 16)),
		`StopsItself.EarlyStop("val_acc")`, "val_loss", `&earlystop.EarlyStopping{Metric: "val_loss", Mode: "min", Patience: 5, MinDelta: 0.0001}`)
	coretest.WantErr(t, newErr(t, &WrongStop{}, coretest.Data(t, 16)), "EarlyStop method", "func() *earlystop.EarlyStopping", "want func (e *WrongStop) EarlyStop() earlystop.Policy")
}

// afterCalls is a custom policy: stop at the After-th epoch it is asked about. Its count is its
// state, so a resumed run stops where the uninterrupted one does.
type afterCalls struct {
	After int
	Seen  int
	epoch []int
}

var (
	_ earlystop.Policy   = (*afterCalls)(nil)
	_ earlystop.Stateful = (*afterCalls)(nil)
)

func (p *afterCalls) ShouldStop(epoch int, val map[string]float64) (bool, string) {
	if _, ok := val["val_loss"]; !ok {
		panic(fmt.Sprintf("ShouldStop without val_loss: %v", val))
	}
	p.Seen++
	p.epoch = append(p.epoch, epoch)
	if p.Seen >= p.After {
		return true, fmt.Sprintf("asked %d times", p.Seen)
	}
	return false, ""
}

func (p *afterCalls) State() (json.RawMessage, error) { return json.Marshal(p.Seen) }

func (p *afterCalls) Restore(st json.RawMessage) (bool, error) {
	return true, json.Unmarshal(st, &p.Seen)
}

// stateless is a custom policy with no State: a resume starts it afresh, and says so.
type stateless struct{ calls int }

func (p *stateless) ShouldStop(int, map[string]float64) (bool, string) { p.calls++; return false, "" }

// TestCustomEarlyStopper: a one-method policy decides the stop (told each epoch and its val
// metrics), its reason is said; its state is checkpointed and restored, so a resumed run stops at
// the epoch the uninterrupted one does; a policy without state starts afresh, said on resume.
func TestCustomEarlyStopper(t *testing.T) {
	con := &core.MemoryConsole{}
	lg := &logjson.Memory{}
	p := &afterCalls{After: 3}
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithoutCheckpoints(), core.WithConsole(con), core.WithLogger(lg), core.WithEarlyStopper(p))...)
	coretest.Train(t, n)
	if n.StopReason() != core.StopEarly || n.Epoch() != 3 || !slices.Equal(p.epoch, []int{1, 2, 3}) || lg.Status() != logjson.StatusEarlyStop {
		t.Errorf("custom policy: stop %q after %d epochs, asked at %v, logger %q; want early_stop after 3, asked at [1 2 3]", n.StopReason(), n.Epoch(), p.epoch, lg.Status())
	}
	if !slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "early stop after epoch 3: asked 3 times") }) {
		t.Errorf("notices %q: want the policy's reason", con.Notices)
	}

	// Interrupted after 2 epochs, resumed: the third epoch stops, as uninterrupted.
	dir := t.TempDir()
	first := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2), core.WithEarlyStopper(&afterCalls{After: 3}))...)
	coretest.Train(t, first)
	resumed := &afterCalls{After: 3}
	con = &core.MemoryConsole{}
	second := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithResume("auto"), core.WithConsole(con), core.WithEarlyStopper(resumed))...)
	if resumed.Seen != 2 {
		t.Fatalf("resumed policy's count %d, want the checkpoint's 2", resumed.Seen)
	}
	coretest.Train(t, second)
	if second.StopReason() != core.StopEarly || second.Epoch() != 3 || !slices.Equal(resumed.epoch, []int{3}) {
		t.Errorf("resumed: stop %q after epoch %d, asked at %v; want early_stop at epoch 3", second.StopReason(), second.Epoch(), resumed.epoch)
	}
	// Resuming the early-stopped run: the restored state stopped there, so nothing trains.
	third := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(10), core.WithResume("auto"), core.WithEarlyStopper(&afterCalls{After: 3}))...)
	coretest.Train(t, third)
	if third.StopReason() != core.StopEarly || len(third.History()) != 0 {
		t.Errorf("resumed early-stopped custom run: stop %q, %d epochs trained; want early_stop, none", third.StopReason(), len(third.History()))
	}
	// Another policy type does not take afterCalls's state.
	con = &core.MemoryConsole{}
	coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(4), core.WithResume("auto"), core.WithConsole(con), core.WithEarlyStopping("val_loss", "min", 5, 0))...)
	if !slices.ContainsFunc(con.Notices, func(s string) bool {
		return strings.Contains(s, "*core_test.afterCalls's") && strings.Contains(s, "starts afresh")
	}) {
		t.Errorf("notices %q: want the policy-type mismatch said", con.Notices)
	}
	// A policy without state: afresh, said.
	con = &core.MemoryConsole{}
	coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(4), core.WithResume("auto"), core.WithConsole(con), core.WithEarlyStopper(&stateless{}))...)
	if !slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "keeps no state") }) {
		t.Errorf("notices %q: want the stateless policy's fresh start said", con.Notices)
	}
}

// TestCustomEarlyStopperMetrics: a policy that names its metric (StopMetric) is checked against
// the val split at setup and only that metric is validated; one that names none reads every val
// metric, so every one is validated (a NaN stops the run with an error naming it).
func TestCustomEarlyStopperMetrics(t *testing.T) {
	coretest.WantErr(t, newErr(t, &Rows{}, coretest.Data(t, 16), core.WithEarlyStopper(&named{metric: "val_acc"}), core.WithoutCheckpoints()),
		`WithEarlyStopper("val_acc")`, "val_mse, val_rows, val_sse")
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithEarlyStopper(&stateless{}), core.WithoutCheckpoints()),
		"WithEarlyStopper", `no "val" split`)
	// NaNMetric reports val_bad = NaN and val_mse.
	n := coretest.New(t, &NaNMetric{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithoutCheckpoints(), core.WithEarlyStopper(&stateless{}))...)
	coretest.WantErr(t, n.Train(), `early-stopping metric "val_bad"`, "NaN")
	coretest.Train(t, coretest.New(t, &NaNMetric{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithoutCheckpoints(), core.WithEarlyStopper(&named{metric: "val_mse"}))...))
}

// named reads one metric and never stops.
type named struct{ metric string }

func (p *named) ShouldStop(int, map[string]float64) (bool, string) { return false, "" }
func (p *named) StopMetric() string                                { return p.metric }
