package cli

import (
	"fmt"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
)

// distOption is the run's core.WithDist from NITRO_RANK and NITRO_WORLD_SIZE (dist.FromEnv), as
// a launcher sets them for each process of a multi-host run; neither set is one process.
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
		return nil, fmt.Errorf("nitro export on %s (%s=%d): only rank 0 writes exports; run it where %s is 0, or unset %s and %s", d, dist.EnvRank, d.Rank, dist.EnvRank, dist.EnvRank, dist.EnvWorldSize)
	}
	return core.WithDist(d), nil
}

// hasBuildData reports whether e builds its own data, in either BuildData form.
func hasBuildData(e any) bool {
	_, plain := e.(core.DataBuilder)
	_, ranked := e.(core.DistDataBuilder)
	return plain || ranked
}
