package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/nitro-go/nitro/monitors"
)

// monitorFlags are the CLI's observation switches.
type monitorFlags struct {
	progress    bool
	heartbeat   string
	stall       time.Duration
	stopOnStall bool
}

// watchers are the shipped monitors a CLI run uses; each runs one goroutine until close.
type watchers struct {
	monitors []monitors.Monitor
	display  *monitors.Display
	closers  []func() error
}

// startMonitors builds the progress display (on stderr: a live bar on a terminal, plain lines
// otherwise), the heartbeat file and the stall watchdog, as the flags ask.
func startMonitors(f monitorFlags, stderr io.Writer) (*watchers, error) {
	w := &watchers{}
	if f.progress {
		w.display = monitors.NewDisplay(monitors.DisplayConfig{Out: stderr})
		w.add(w.display, w.display.Close)
	}
	if f.heartbeat != "" {
		h, err := monitors.NewHeartbeat(monitors.HeartbeatConfig{Path: f.heartbeat})
		if err != nil {
			return nil, errors.Join(w.close(), fmt.Errorf("--heartbeat: %w", err)) // err names the file
		}
		w.add(h, h.Close)
	}
	if f.stall < 0 {
		return nil, errors.Join(w.close(), fmt.Errorf("--stall-timeout %s: must be >= 0 (0 turns the watchdog off)", f.stall))
	}
	if f.stall > 0 {
		wd := monitors.NewWatchdog(monitors.WatchdogConfig{Patience: f.stall, StopOnStall: f.stopOnStall,
			Log: func(msg string) { fmt.Fprintln(stderr, "nitro:", msg) }})
		w.add(wd, wd.Close)
	} else if f.stopOnStall {
		return nil, errors.Join(w.close(), errors.New("--stop-on-stall needs --stall-timeout"))
	}
	return w, nil
}

func (w *watchers) add(m monitors.Monitor, close func() error) {
	w.monitors = append(w.monitors, m)
	w.closers = append(w.closers, close)
}

// settle redraws the display once more so its last state is on screen before other output.
func (w *watchers) settle() {
	if w.display != nil {
		w.display.Refresh()
	}
}

// close stops every monitor goroutine and reports what failed to close.
func (w *watchers) close() error {
	var errs []error
	for _, c := range w.closers {
		errs = append(errs, c())
	}
	w.closers = nil
	return errors.Join(errs...)
}

// onInterrupt calls stop on the first SIGINT (after saying what happens next, the line next) and
// restores the default handling, so a second SIGINT kills the process. The returned teardown
// stops listening and waits for the listener goroutine.
func onInterrupt(stderr io.Writer, next string, stop func()) func() {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	signal.Notify(ch, os.Interrupt)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ch:
			signal.Stop(ch)
			fmt.Fprintf(stderr, "\nnitro: interrupt: %s (interrupt again to kill)\n", next)
			stop()
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}
