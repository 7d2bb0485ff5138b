package cli

import (
	"fmt"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
)

// distOption is the run's core.WithDist from the launcher's variables (dist.FromEnv: NITRO_*,
// JAX_*, Open MPI, Slurm, torchrun, an indexed Job), as a launcher sets them for each process of
// a multi-process run; none set is one process.
func distOption() (core.Option, error) {
	d, err := dist.FromEnv(nil)
	if err != nil {
		return nil, fmt.Errorf("the process's rank: %w", err)
	}
	return core.WithDist(d), nil
}

// exportDist is distOption for nitro export, which refuses a rank other than 0 before any setup
// work: one process writes the bundle.
func exportDist() (core.Option, error) {
	d, err := dist.FromEnv(nil)
	if err != nil {
		return nil, fmt.Errorf("the process's rank: %w", err)
	}
	if !d.IsRank0() {
		return nil, fmt.Errorf("nitro export on %s: only rank 0 writes exports; run it as one process (outside the launcher, or with %s=0 and %s=1)", d.Describe(), dist.EnvRank, dist.EnvWorldSize)
	}
	return core.WithDist(d), nil
}

// hasBuildData reports whether e builds its own data, in either BuildData form.
func hasBuildData(e any) bool {
	_, plain := e.(core.DataBuilder)
	_, ranked := e.(core.DistDataBuilder)
	return plain || ranked
}
