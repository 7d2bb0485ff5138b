package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nitro-go/nitro/sweep"
)

// Trials in worker processes (--parallel K, the default mode): the sweep's process keeps the
// record and the pruner, and K copies of this executable train the trials, one at a time each.
//
//	sweep process                          worker (nitro sweep ... --worker)
//	  order {number, sets, seed, dir} ──▶  sets the trial up, trains it
//	                                  ◀──  report {step, value}     (each validation)
//	  reply {prune}                   ──▶  stops the run when prune
//	                                  ◀──  end {attrs, error}
//
// Orders and replies go down the worker's stdin, reports and ends come up its fd 3, one JSON
// object a line; the worker's stdout is not read (a trial's console is off) and its stderr is
// the sweep's. Invariant: a worker has at most one trial, and a trial's every report is answered
// before the worker sends anything else, so neither side ever has two messages outstanding.
// A worker whose parent dies is killed with it (Linux), and one whose stdin closes exits.

// workerMsg is a message up from a worker: a report or a trial's end.
type workerMsg struct {
	Report *struct {
		Step  int     `json:"step"`
		Value float64 `json:"value"`
	} `json:"report,omitempty"`
	End *struct {
		Attrs  map[string]any `json:"attrs"`
		Pruned bool           `json:"pruned"`
		Error  string         `json:"error"`
	} `json:"end,omitempty"`
}

// workerReply answers a report.
type workerReply struct {
	Prune bool `json:"prune"`
}

// worker is one worker process, as the sweep's process holds it.
type worker struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	exit chan error // the process's end, once
}

// workerPool is the Objective of --parallel K over processes: each Run takes an idle worker (or
// starts one) and relays the trial's reports to the sweep.
type workerPool struct {
	args   []string // this command's arguments, --worker added
	stderr io.Writer

	mu   sync.Mutex
	idle []*worker
	all  []*worker

	// gate holds every trial but the first until the first has validated once: its programs
	// are compiled and on their way to the disk cache, which the other workers then load from
	// instead of compiling the same programs beside it.
	gateOnce sync.Once
	gate     chan struct{}
	first    sync.Once

	// compiled and misses sum the workers' per-trial counts, for the sweep's totals.
	compiled, fromDisk, misses atomic.Int64
}

var _ sweep.Objective = (*workerPool)(nil)

func newWorkerPool(args []string, stderr io.Writer) *workerPool {
	return &workerPool{args: append(append([]string(nil), args...), "--worker"), stderr: stderr, gate: make(chan struct{})}
}

func (p *workerPool) openGate() { p.gateOnce.Do(func() { close(p.gate) }) }

// take is an idle worker, or a new one.
func (p *workerPool) take() (*worker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return w, nil
	}
	cmd, err := workerCommand(p.args)
	if err != nil {
		return nil, fmt.Errorf("sweep: starting a worker process: %w", err)
	}
	cmd.Stdout, cmd.Stderr = io.Discard, p.stderr
	cmd.SysProcAttr = workerAttrs()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{wr}
	if err := cmd.Start(); err != nil {
		r.Close()
		wr.Close()
		return nil, fmt.Errorf("sweep: starting a worker process: %w", err)
	}
	wr.Close() // the worker's copy is the one that stays open
	w := &worker{cmd: cmd, in: in, out: bufio.NewScanner(r), exit: make(chan error, 1)}
	w.out.Buffer(make([]byte, 64<<10), 1<<20)
	go func() { w.exit <- cmd.Wait(); r.Close() }()
	p.all = append(p.all, w)
	return w, nil
}

func (p *workerPool) give(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
}

// drop forgets a worker that failed or was interrupted; it is stopped.
func (p *workerPool) drop(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.all {
		if x == w {
			p.all = append(p.all[:i], p.all[i+1:]...)
			break
		}
	}
	_ = w.in.Close()
}

// Close ends every worker: their stdin closes and they exit after the trial they have (none).
func (p *workerPool) Close() {
	p.mu.Lock()
	all := p.all
	p.all, p.idle = nil, nil
	p.mu.Unlock()
	for _, w := range all {
		_ = w.in.Close()
		<-w.exit
	}
}

func (p *workerPool) Run(ctx context.Context, t *sweep.TrialRun) (sweep.Outcome, error) {
	isFirst := false
	p.first.Do(func() { isFirst = true })
	if !isFirst {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return sweep.Outcome{}, ctx.Err()
		}
	} else {
		defer p.openGate() // a first trial that ends before validating opens it too
	}
	w, err := p.take()
	if err != nil {
		return sweep.Outcome{}, err
	}
	if err := sendLine(w.in, newOrder(t)); err != nil {
		p.drop(w)
		return sweep.Outcome{}, fmt.Errorf("sweep: handing trial %d to its worker: %w", t.Number, err)
	}
	// Ctrl+C reaches the worker as SIGINT: it stops the trial at the next step, which stays
	// RUNNING in the record for --resume.
	stopWatch := context.AfterFunc(ctx, func() { _ = w.cmd.Process.Signal(os.Interrupt) })
	defer stopWatch()
	for w.out.Scan() {
		var m workerMsg
		if err := json.Unmarshal(w.out.Bytes(), &m); err != nil {
			p.drop(w)
			return sweep.Outcome{}, fmt.Errorf("sweep: trial %d's worker sent %q: %w", t.Number, w.out.Text(), err)
		}
		switch {
		case m.Report != nil:
			prune, err := t.Report(m.Report.Step, m.Report.Value)
			p.openGate()
			if err != nil {
				p.drop(w)
				return sweep.Outcome{}, err
			}
			if err := sendLine(w.in, workerReply{Prune: prune}); err != nil {
				p.drop(w)
				return sweep.Outcome{}, fmt.Errorf("sweep: answering trial %d's worker: %w", t.Number, err)
			}
		case m.End != nil:
			out := sweep.Outcome{Pruned: m.End.Pruned, Attrs: m.End.Attrs}
			if v, ok := out.Attrs["plugin_compiles"].(float64); ok {
				p.compiled.Add(int64(v))
			}
			if v, ok := out.Attrs["plugin_from_disk"].(float64); ok {
				p.fromDisk.Add(int64(v))
			}
			if v, ok := out.Attrs["program_cache_misses"].(float64); ok {
				p.misses.Add(int64(v))
			}
			if ctx.Err() != nil {
				p.drop(w)
				return out, ctx.Err()
			}
			p.give(w)
			if m.End.Error != "" {
				return out, errors.New(m.End.Error)
			}
			return out, nil
		}
	}
	p.drop(w)
	werr := <-w.exit
	if ctx.Err() != nil {
		return sweep.Outcome{}, ctx.Err()
	}
	return sweep.Outcome{}, fmt.Errorf("sweep: trial %d's worker process ended mid-trial (%v); its output is on stderr above", t.Number, werr)
}

// workerCommand is a worker process running this executable's CLI on args (tests replace it:
// their executable is the test binary).
var workerCommand = func(args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, args...), nil
}

func sendLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// serveWorker is the worker's side: it trains the trials its stdin orders, reporting up fd 3,
// until stdin closes.
func (st *sweepSetup) serveWorker(ctx context.Context, cfg sweep.Config) error {
	up := os.NewFile(3, "sweep-reports")
	if up == nil {
		return errors.New("--worker: no report pipe (fd 3): --worker is for the processes nitro sweep starts itself")
	}
	defer up.Close()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for in.Scan() {
		var o trialOrder
		if err := json.Unmarshal(in.Bytes(), &o); err != nil {
			return fmt.Errorf("--worker: order %q: %w", in.Text(), err)
		}
		t := &sweep.TrialRun{Number: o.Number, Sets: o.Sets, Seed: o.Seed, Dir: o.Dir}
		t.SetReport(func(step int, value float64) (bool, error) {
			var m workerMsg
			m.Report = &struct {
				Step  int     `json:"step"`
				Value float64 `json:"value"`
			}{step, value}
			if err := sendLine(up, m); err != nil {
				return false, err
			}
			if !in.Scan() {
				return false, errors.New("the sweep's process closed the pipe")
			}
			var r workerReply
			if err := json.Unmarshal(in.Bytes(), &r); err != nil {
				return false, fmt.Errorf("reply %q: %w", in.Text(), err)
			}
			return r.Prune, nil
		})
		out, err := st.runOrder(ctx, cfg, o, t, true)
		if out.Attrs == nil {
			out.Attrs = map[string]any{}
		}
		out.Attrs["pid"] = os.Getpid()
		var m workerMsg
		m.End = &struct {
			Attrs  map[string]any `json:"attrs"`
			Pruned bool           `json:"pruned"`
			Error  string         `json:"error"`
		}{Attrs: out.Attrs, Pruned: out.Pruned}
		if err != nil {
			m.End.Error = err.Error()
		}
		if err := sendLine(up, m); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// workerArgs are the sweep's command line for its workers: the same experiment and flags, so
// they build the same trials, but for --resume (a worker never opens the record).
func workerArgs(c *cobra.Command, expName string) []string {
	args := []string{"sweep", expName}
	c.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name == "resume" {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+fl.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	})
	return args
}
