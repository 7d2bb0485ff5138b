package dist

import "fmt"

// Dist is this process's place in a run of WorldSize processes: Rank 0 is the one that writes
// (checkpoints, the metrics record, exports); every rank trains on its own shard of the data.
type Dist struct {
	Rank      int // this process, in [0, WorldSize)
	WorldSize int // how many processes the run spans, >= 1
	LocalRank int // this process among those on its host, when the launcher says (else 0)

	// Source is the launcher FromEnv read (SourceOpenMPI, ...); SourceNone for Single() and a
	// Dist written by hand.
	Source string
	// Coordinator is the address the launcher gives for rank 0 (JAX's, torchrun's), else
	// $NITRO_COORDINATOR, else "".
	Coordinator string
}

// MPIRanks reports whether the launcher started the processes as the ranks of one MPI job:
// mpirun's (Open MPI), or srun --mpi=pmix's, where Slurm's PMIx server wires the MPI library up.
// Only such processes can open an MPI communicator among themselves.
func (d Dist) MPIRanks() bool { return d.Source == SourceOpenMPI || d.Source == SourceSlurmMPI }

// Single is the one-process run: rank 0 of 1.
func Single() Dist { return Dist{Rank: 0, WorldSize: 1} }

// IsRank0 reports whether this process is the run's writer.
func (d Dist) IsRank0() bool { return d.Rank == 0 }

// String is "rank R of W".
func (d Dist) String() string { return fmt.Sprintf("rank %d of %d", d.Rank, d.WorldSize) }

// Describe is String with the launcher it came from, for the config report: "rank 1 of 4
// (openmpi)", or "rank 0 of 1 (no launcher)".
func (d Dist) Describe() string {
	src := d.Source
	if src == SourceNone {
		src = "no launcher"
	}
	return fmt.Sprintf("%s (%s)", d, src)
}

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
