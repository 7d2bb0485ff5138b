package cli

import (
	"fmt"
	"io"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/mpi"
)

// distOption is the run's core.WithDist from the launcher's variables (dist.FromEnv: NITRO_*,
// JAX_*, Open MPI, Slurm, torchrun, an indexed Job), as a launcher sets them for each process of
// a multi-process run; none set is one process.
//
// Under mpirun (Open MPI) or srun --mpi=pmix (Slurm wiring Open MPI up through PMIx), with more
// than one process, train and evaluate also run over MPI
// (core.WithCollective with package mpi's Comm, libmpi loaded only now): gradients and
// validation are summed across the ranks. end must run when the command is done: it finalizes
// MPI after a success; after a failure it reports the error with the rank and aborts the whole
// run (MPI_Abort), since the other ranks may be waiting for this one in a collective.
func distOption(cmd string, stderr io.Writer) (opts []core.Option, end func(error), err error) {
	opts, _, end, err = distCollective(cmd, stderr)
	return opts, end, err
}

// distCollective is distOption that also returns the MPI collective it opened (nil when none).
func distCollective(cmd string, stderr io.Writer) (opts []core.Option, comm core.Collective, end func(error), err error) {
	end = func(error) {}
	d, err := dist.FromEnv(nil)
	if err != nil {
		return nil, nil, end, fmt.Errorf("the process's rank: %w", err)
	}
	opts = []core.Option{core.WithDist(d)}
	if !d.MPIRanks() || d.WorldSize == 1 || (cmd != "train" && cmd != "evaluate" && cmd != "sweep") {
		return opts, nil, end, nil
	}
	c, err := mpi.Open("")
	if err != nil {
		return nil, nil, end, fmt.Errorf("%s under mpirun (%s): %w", cmd, d.Describe(), err)
	}
	end = func(err error) {
		if err == nil {
			err = c.Close()
		}
		if err != nil {
			fmt.Fprintf(stderr, "nitro: %s: %v\nnitro: %s: stopping every rank (MPI_Abort)\n", d, err, d)
			c.Abort(1)
		}
	}
	return append(opts, core.WithCollective(c)), c, end, nil
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

// probesRunDir reports whether this process is the one that writes the run dir, rank 0 (also when
// the launcher's variables cannot be read: distOption reports that error itself).
func probesRunDir() bool {
	d, err := dist.FromEnv(nil)
	return err != nil || d.IsRank0()
}
