package dist

import (
	"fmt"
	"os"
	"strconv"
)

// Dist is this process's place in a run of WorldSize processes: Rank 0 is the one that writes
// (checkpoints, the metrics record, exports); every rank trains on its own shard of the data.
type Dist struct {
	Rank      int // this process, in [0, WorldSize)
	WorldSize int // how many processes the run spans, >= 1
}

// Single is the one-process run: rank 0 of 1.
func Single() Dist { return Dist{Rank: 0, WorldSize: 1} }

// IsRank0 reports whether this process is the run's writer.
func (d Dist) IsRank0() bool { return d.Rank == 0 }

// String is "rank R of W".
func (d Dist) String() string { return fmt.Sprintf("rank %d of %d", d.Rank, d.WorldSize) }

// Validate refuses a world size below 1 and a rank outside [0, WorldSize).
func (d Dist) Validate() error {
	if d.WorldSize < 1 {
		return fmt.Errorf("dist: WorldSize %d: a run spans at least 1 process (dist.Single() is rank 0 of 1)", d.WorldSize)
	}
	if d.Rank < 0 || d.Rank >= d.WorldSize {
		return fmt.Errorf("dist: Rank %d with WorldSize %d: the rank must be in [0, %d)", d.Rank, d.WorldSize, d.WorldSize)
	}
	return nil
}

// The environment variables FromEnv reads, as a launcher (one process per host) sets them.
const (
	EnvRank      = "NITRO_RANK"
	EnvWorldSize = "NITRO_WORLD_SIZE"
)

// FromEnv reads the Dist from NITRO_RANK and NITRO_WORLD_SIZE through lookup (os.LookupEnv when
// nil). Neither set is Single(); one without the other, a value that is not an integer, or a
// rank outside [0, world) is an error naming the variable and its value.
func FromEnv(lookup func(string) (string, bool)) (Dist, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	rs, rok := lookup(EnvRank)
	ws, wok := lookup(EnvWorldSize)
	switch {
	case !rok && !wok:
		return Single(), nil
	case !wok:
		return Dist{}, fmt.Errorf("%s=%q is set and %s is not: set both (the rank and how many processes the run spans), or neither for one process", EnvRank, rs, EnvWorldSize)
	case !rok:
		return Dist{}, fmt.Errorf("%s=%q is set and %s is not: set both (this process's rank in [0, %s) and the world size), or neither for one process", EnvWorldSize, ws, EnvRank, ws)
	}
	w, err := strconv.Atoi(ws)
	if err != nil || w < 1 {
		return Dist{}, fmt.Errorf("%s=%q: want an integer >= 1, the number of processes the run spans", EnvWorldSize, ws)
	}
	r, err := strconv.Atoi(rs)
	if err != nil || r < 0 || r >= w {
		return Dist{}, fmt.Errorf("%s=%q with %s=%d: want an integer in [0, %d)", EnvRank, rs, EnvWorldSize, w, w)
	}
	return Dist{Rank: r, WorldSize: w}, nil
}
