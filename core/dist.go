package core

import (
	"fmt"
	"reflect"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/prefetch"
)

// The multi-process seam, as core composes it: which process this run is (package dist's Dist),
// handed to BuildData, and the rule that only rank 0 writes. Nothing here talks to another
// process: a run of several processes also needs a coordinator and cross-process collectives,
// which the PJRT client gopjrt v0.10.0 creates has not (docs/multihost.md).

// WithDist runs this process as rank d.Rank of d.WorldSize (the default is dist.Single(), rank 0
// of 1; the CLI reads dist.FromEnv). The rank reaches BuildData(d dist.Dist), the monitors' IsRank0
// and Nitro.Dist. Only rank 0 writes: on every other rank the run keeps no record (no logger),
// its checkpointer only reads (checkpoint.ReadOnly: a resume reads rank 0's checkpoints, a save
// writes nothing) and Export refuses. New refuses a rank outside [0, WorldSize).
func WithDist(d dist.Dist) Option { return func(o *options) { o.dist = &d } }

// DistDataBuilder is the BuildData hook with the run's Dist: the experiment builds its rank's
// share of the data (dist.Shard, dist.ShardData). An experiment defines this form or
// DataBuilder's, BuildData() (prefetch.Data, error), which every rank calls alike.
type DistDataBuilder interface {
	BuildData(d dist.Dist) (prefetch.Data, error)
}

// Dist is the rank and world size this Nitro runs as.
func (n *Nitro) Dist() dist.Dist { return distOf(n.spec.opts) }

func distOf(o options) dist.Dist {
	if o.dist == nil {
		return dist.Single()
	}
	return *o.dist
}

// checkDist is setup's dist phase: the rank is in range, and a rank other than 0 says on the
// console that it writes nothing.
func (bld *builder) checkDist() error {
	n := bld.n
	d := n.Dist()
	if err := d.Validate(); err != nil {
		return fmt.Errorf("WithDist: %w", err)
	}
	if !d.IsRank0() {
		n.spec.notice(fmt.Sprintf("%s: this process writes no checkpoints, metrics or exports; rank 0 does", d))
	}
	return nil
}

// buildData calls the experiment's BuildData, with the Dist when it takes one; the hook's error
// comes back prefixed "BuildData: ".
func (bld *builder) buildData() (d prefetch.Data, err error) {
	n := bld.n
	// Two assertions, not a type switch: the contract test finds a hook by its assertion on n.e.
	if db, ok := n.spec.e.(DistDataBuilder); ok {
		d, err = db.BuildData(n.Dist())
	} else if db, ok := n.spec.e.(DataBuilder); ok {
		if d, err = db.BuildData(); err == nil {
			return bld.shardForCollective(d) // collective.go: a plain BuildData's splits, sharded
		}
	} else {
		return nil, bld.noDataBuilder()
	}
	if err != nil {
		return nil, fmt.Errorf("BuildData: %w", err)
	}
	return d, nil
}

// noDataBuilder is the error for an experiment with neither BuildData form.
func (bld *builder) noDataBuilder() error {
	su := &bld.n.spec
	if m, ok := reflect.TypeOf(su.e).MethodByName("BuildData"); ok {
		return fmt.Errorf("experiment %s has BuildData of type %v, which is neither hook form: define func (e *%s) BuildData() (prefetch.Data, error) or func (e *%s) BuildData(d dist.Dist) (prefetch.Data, error)", su.typeName, m.Type, su.typeName, su.typeName)
	}
	return fmt.Errorf("experiment %s has no BuildData hook and no data was supplied: define func (e *%s) BuildData() (prefetch.Data, error) (or BuildData(d dist.Dist) for a rank's share) or pass core.WithData", su.typeName, su.typeName)
}

// rankLog is the run's logger on this rank: the one chosen on rank 0, none on the others.
func rankLog(o options, l runLog) runLog {
	if !distOf(o).IsRank0() {
		l.l = nil
	}
	return l
}

// rankCheckpointer is the run's checkpointer on this rank: c on rank 0, a view of c that reads
// and writes nothing on the others (nil stays nil).
func (bld *builder) rankCheckpointer(c checkpoint.Checkpointer) checkpoint.Checkpointer {
	n := bld.n
	if n.Dist().IsRank0() {
		return c
	}
	return checkpoint.ReadOnly(c)
}

// writerOnly refuses verb (an export) on a rank other than 0: one process writes the artifact.
func (n *Nitro) writerOnly(verb string) error {
	if d := n.Dist(); !d.IsRank0() {
		return fmt.Errorf("%s on %s: only rank 0 writes exports; call it on rank 0 alone (if n.Dist().IsRank0() { ... })", verb, d)
	}
	return nil
}
