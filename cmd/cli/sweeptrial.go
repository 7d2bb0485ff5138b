package cli

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/earlystop"
	"github.com/nitro-go/nitro/sweep"
)

// cliObjective runs a trial as nitro train would, in this process: the compiled programs are
// the process cache's, shared by every trial with the same GraphConst values.
type cliObjective struct {
	st  *sweepSetup
	cfg sweep.Config
}

var _ sweep.Objective = (*cliObjective)(nil)

func (o *cliObjective) Run(ctx context.Context, t *sweep.TrialRun) (sweep.Outcome, error) {
	order := newOrder(t)
	if o.st.ranks != nil {
		if err := o.st.ranks.send(order); err != nil {
			return sweep.Outcome{}, err
		}
	}
	return o.st.runOrder(ctx, o.cfg, order, t, o.cfg.Parallel == 1)
}

// newOrder is how a trial is set up: a trial handed back after a kill continues from its newest
// checkpoint, or starts afresh over what it had logged when it had none.
func newOrder(t *sweep.TrialRun) trialOrder {
	o := trialOrder{Number: t.Number, Sets: t.Sets, Seed: t.Seed, Dir: t.Dir}
	if t.Resume {
		_, o.FromCheckpoint, _ = checkpoint.Newest(t.Dir)
		o.Overwrite = !o.FromCheckpoint
	}
	return o
}

// runOrder sets a trial up and trains it, reporting through t. counts records the compiles it
// took, when this process runs no other trial beside it.
func (st *sweepSetup) runOrder(ctx context.Context, cfg sweep.Config, order trialOrder, t *sweep.TrialRun, counts bool) (sweep.Outcome, error) {
	start := time.Now()
	compiled0, fromDisk0 := backend.CompileCounts()
	misses0 := compilecache.Default().Stats().Misses
	pol := &prunePolicy{t: t, metric: cfg.Metric, viaStop: st.ranks != nil}
	n, err := st.setUp(order, pol)
	if err != nil {
		return sweep.Outcome{}, err
	}
	pol.n = n
	trainErr := n.TrainContext(ctx)
	out := sweep.Outcome{Pruned: pol.pruned, Attrs: map[string]any{
		"seconds": math.Round(time.Since(start).Seconds()*10) / 10, "steps": n.Step(), "stop_reason": string(n.StopReason()),
	}}
	if p := n.LastCheckpoint(); p != "" {
		out.Attrs["checkpoint"] = filepath.Base(p)
	}
	if counts {
		compiled, fromDisk := backend.CompileCounts()
		out.Attrs["plugin_compiles"] = int(compiled - compiled0)
		out.Attrs["plugin_from_disk"] = int(fromDisk - fromDisk0)
		out.Attrs["program_cache_misses"] = compilecache.Default().Stats().Misses - misses0
	}
	n, pol.n = nil, nil
	runtime.GC() // the trial's device buffers go before the next trial's
	if counts {
		// The process's resident memory once the trial is collected: a sweep whose figure climbs
		// from trial to trial keeps something of each.
		if mb, ok := residentMB(); ok {
			out.Attrs["rss_after_mb"] = mb
		}
	}
	switch {
	case trainErr != nil:
		return out, trainErr
	case pol.err != nil:
		return out, pol.err
	case ctx.Err() != nil:
		return out, ctx.Err()
	}
	return out, nil
}

// setUp builds a trial's run from its order: the experiment with the trial's values, its run
// dir, seed and resume. Setups run one at a time: with --parallel, the second trial to set up
// finds the first's programs in the process cache instead of compiling them again beside it.
func (st *sweepSetup) setUp(o trialOrder, stop earlystop.Policy) (*core.Nitro, error) {
	e, err := st.ent.configure(st.f.preset, append(append([]string(nil), st.base...), o.Sets...))
	if err != nil {
		return nil, err
	}
	opts := append(st.trialOptions(true), core.WithRunDir(o.Dir), core.WithSeed(o.Seed), core.WithEarlyStopper(stop))
	switch {
	case o.FromCheckpoint:
		opts = append(opts, core.WithResume(core.ResumeAuto))
	case o.Overwrite:
		opts = append(opts, core.WithOverwrite())
	}
	st.setupMu.Lock()
	defer st.setupMu.Unlock()
	return core.New(e, opts...)
}

// prunePolicy reports each validation's metric to the sweep, which records it, and stops the run
// when the pruner says so. Its steps are validations (epochs, or --val-every periods). Under
// mpirun (viaStop) it stops the run by RequestStop: the loop ends a run when any rank requested
// it, at the same validation on every rank, so rank 0's decision is every rank's.
type prunePolicy struct {
	t       *sweep.TrialRun
	metric  string
	n       *core.Nitro
	viaStop bool
	pruned  bool
	err     error
}

var (
	_ earlystop.Policy       = (*prunePolicy)(nil)
	_ earlystop.MetricReader = (*prunePolicy)(nil)
)

func (p *prunePolicy) StopMetric() string { return p.metric }

func (p *prunePolicy) ShouldStop(validation int, val map[string]float64) (bool, string) {
	v, ok := val[p.metric]
	if !ok {
		p.err = fmt.Errorf("validation %d reported no %s", validation, p.metric)
		return true, p.err.Error()
	}
	prune, err := p.t.Report(validation, v)
	if err != nil {
		p.err = fmt.Errorf("recording %s at validation %d: %w", p.metric, validation, err)
		return true, p.err.Error()
	}
	if prune {
		p.pruned = true
		if p.viaStop {
			p.n.RequestStop()
			return false, ""
		}
		return true, fmt.Sprintf("pruned: %s %.4g at validation %d is not among the best at its rung", p.metric, v, validation)
	}
	return false, ""
}
