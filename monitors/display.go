package monitors

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// DisplayMode selects the progress display's output.
type DisplayMode int

const (
	// DisplayAuto uses DisplayTerminal when Out is a terminal, else DisplayPlain.
	DisplayAuto DisplayMode = iota
	// DisplayPlain writes one line per epoch (and one per compile and end state).
	DisplayPlain
	// DisplayTerminal draws a live progress bar.
	DisplayTerminal
)

// LossReporter and StepsReporter are optional Run extensions the display reads (*Tracker
// implements both).
type (
	LossReporter  interface{ LastLoss() (float64, bool) }
	StepsReporter interface{ StepsPerEpoch() int }
)

// DisplayConfig configures a progress display.
type DisplayConfig struct {
	Out      io.Writer     // default os.Stderr
	Mode     DisplayMode   // default DisplayAuto
	Interval time.Duration // refresh period of the goroutine (default 200ms)
	Now      func() time.Time
}

// Display shows epoch, step / steps in the epoch, steps/s, ETA and last loss, and
// "compiling <program>" while a compile runs. Register it as a Monitor; Close stops it.
type Display struct {
	cfg  DisplayConfig
	mode DisplayMode

	mu         sync.Mutex
	phase      Phase
	run        Run
	epoch      int
	epochStart time.Time
	epochCount uint64 // progress counter at epoch start
	inEpoch    bool
	terminal   string                   // the end state last shown
	bar        *progressbar.ProgressBar // the epoch's bar (terminal mode)
	spin       *progressbar.ProgressBar // a compile's spinner between epochs (terminal mode)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewDisplay starts the display goroutine.
func NewDisplay(cfg DisplayConfig) *Display {
	if cfg.Out == nil {
		cfg.Out = os.Stderr
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	mode := cfg.Mode
	if mode == DisplayAuto {
		mode = DisplayPlain
		if f, ok := cfg.Out.(fileDescriptor); ok && term.IsTerminal(int(f.Fd())) {
			mode = DisplayTerminal
		}
	}
	d := &Display{cfg: cfg, mode: mode, phase: Starting{}, stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d
}

// Mode reports the resolved mode.
func (d *Display) Mode() DisplayMode { return d.mode }

func (d *Display) loop() {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.Refresh()
		}
	}
}

type snapshotView struct {
	at    Progress
	steps int
	loss  float64
	has   bool
}

// epochStep is the step within the current epoch: Progress.Step counts optimizer steps over the
// whole run, and every epoch has the same number of steps.
func (v snapshotView) epochStep() int {
	if v.steps <= 0 || v.at.Epoch < 1 {
		return v.at.Step
	}
	return min(max(v.at.Step-(v.at.Epoch-1)*v.steps, 0), v.steps)
}

func view(run Run) snapshotView {
	var v snapshotView
	if run == nil {
		return v
	}
	v.at = run.Progress()
	if s, ok := run.(StepsReporter); ok {
		v.steps = s.StepsPerEpoch()
	}
	if l, ok := run.(LossReporter); ok {
		v.loss, v.has = l.LastLoss()
	}
	return v
}

// Observe implements Monitor.
func (d *Display) Observe(phase Phase, at Progress, info Info) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if info.Run != nil {
		d.run = info.Run
	}
	prev := d.phase
	d.phase = phase
	// An epoch ends when the run leaves training for evaluation or an end state; a compile in the
	// middle of an epoch (the first step's programs) is part of it.
	if IsStepping(phase) || IsTerminal(phase) {
		if _, was := prev.(TrainStepping); was {
			if _, is := phase.(TrainStepping); !is {
				d.endEpochLocked()
			}
		}
	}
	var err error
	if _, ok := phase.(Compiling); !ok && d.spin != nil {
		err = d.spin.Finish() // the compile is over: its spinner clears itself and its goroutine ends
		d.spin = nil
	}
	switch p := phase.(type) {
	case Compiling:
		d.describeLocked("compiling " + p.Program())
	case TrainStepping:
		d.refreshLocked()
	case Terminal:
		// A standalone evaluation after the run returns it to its end state: say it once. On a
		// terminal the caller reports the outcome; the plain log gets its own line.
		if d.terminal == p.String() {
			return err
		}
		d.terminal = p.String()
		if d.mode == DisplayPlain {
			fmt.Fprintln(d.cfg.Out, p.String())
		}
	}
	return err
}

// describeLocked shows s: a plain line, the live epoch bar's description (a compile inside an
// epoch), or a spinner of its own between epochs, cleared when the phase moves on.
func (d *Display) describeLocked(s string) {
	switch {
	case d.mode == DisplayPlain:
		fmt.Fprintln(d.cfg.Out, s)
	case d.inEpoch && d.bar != nil:
		d.bar.Describe(s)
	default:
		if d.spin == nil {
			d.spin = progressbar.NewOptions(-1, progressbar.OptionSetWriter(d.cfg.Out),
				progressbar.OptionClearOnFinish(), progressbar.OptionSetRenderBlankState(true))
		}
		d.spin.Describe(s)
	}
}

func (d *Display) newBar(max int) *progressbar.ProgressBar {
	return progressbar.NewOptions(max,
		progressbar.OptionSetWriter(d.cfg.Out),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("steps"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(0),
		progressbar.OptionSetRenderBlankState(true),
		// A finished epoch bar keeps its line; what is printed next starts on a new one.
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(d.cfg.Out) }))
}

// Refresh updates the display from the run now (the goroutine calls it every Interval).
func (d *Display) Refresh() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refreshLocked()
}

func (d *Display) refreshLocked() {
	if _, ok := d.phase.(TrainStepping); !ok || d.run == nil {
		return
	}
	v := view(d.run)
	if !v.at.Started {
		return
	}
	if d.inEpoch && v.at.Epoch != d.epoch {
		d.endEpochLocked()
	}
	if !d.inEpoch {
		d.inEpoch, d.epoch, d.epochStart, d.epochCount = true, v.at.Epoch, d.cfg.Now(), ProgressCounter()
		if d.mode == DisplayTerminal {
			if d.bar != nil {
				_ = d.bar.Finish()
			}
			d.bar = d.newBar(max(v.steps, -1))
			if v.steps == 0 {
				d.bar.ChangeMax(-1)
			}
		}
	}
	if d.mode == DisplayTerminal && d.bar != nil {
		desc := fmt.Sprintf("epoch %d", v.at.Epoch)
		if v.has {
			desc += fmt.Sprintf(" loss %.4g", v.loss)
		}
		d.bar.Describe(desc)
		_ = d.bar.Set(v.epochStep())
	}
}

// endEpochLocked closes the current epoch: one plain line, or a finished bar.
func (d *Display) endEpochLocked() {
	if !d.inEpoch {
		return
	}
	d.inEpoch = false
	v := view(d.run)
	el := d.cfg.Now().Sub(d.epochStart)
	n := ProgressCounter() - d.epochCount
	rate := 0.0
	if el > 0 {
		rate = float64(n) / el.Seconds()
	}
	if d.mode == DisplayTerminal {
		if d.bar != nil {
			// A full epoch finishes its bar; a cut one (a stop, a failure) keeps where it got to.
			// Both leave the cursor on a fresh line. Redraw errors are the terminal's; ignored.
			if v.steps > 0 && v.epochStep() >= v.steps {
				_ = d.bar.Finish()
			} else {
				_ = d.bar.Exit()
				fmt.Fprintln(d.cfg.Out)
			}
			d.bar = nil
		}
		return
	}
	line := fmt.Sprintf("epoch %d: step %d", d.epoch, v.epochStep())
	if v.steps > 0 {
		line += fmt.Sprintf("/%d", v.steps)
	}
	line += fmt.Sprintf(", %.1f steps/s, %s", rate, el.Round(time.Millisecond))
	if v.has {
		line += fmt.Sprintf(", loss %.4g", v.loss)
	}
	fmt.Fprintln(d.cfg.Out, line)
}

// ETA estimates the time left in the current epoch from the epoch's rate so far (0: unknown).
func (d *Display) ETA() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := view(d.run)
	done := v.epochStep()
	if !d.inEpoch || v.steps == 0 || done <= 0 {
		return 0
	}
	el := d.cfg.Now().Sub(d.epochStart)
	return time.Duration(float64(el) / float64(done) * float64(v.steps-done))
}

// Close stops the goroutine and waits for it; safe to call more than once.
func (d *Display) Close() error {
	d.once.Do(func() { close(d.stop) })
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.spin != nil { // closed mid-compile: end the spinner's goroutine too
		err := d.spin.Finish()
		d.spin = nil
		return err
	}
	return nil
}

// fileDescriptor is an output backed by a file descriptor (an *os.File): only such an output can
// be a terminal that gets the live bar.
type fileDescriptor interface {
	Fd() uintptr
}
