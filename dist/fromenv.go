package dist

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The environment variables FromEnv reads. NITRO_* are nitro's own; the others are what the
// launchers set for each process they start.
const (
	EnvRank      = "NITRO_RANK"
	EnvWorldSize = "NITRO_WORLD_SIZE"
	// EnvCoordinator is rank 0's host:port for launchers that give none (NITRO_*, Open MPI,
	// Slurm, an indexed Job): the GPU plugin's processes meet there.
	EnvCoordinator = "NITRO_COORDINATOR"

	EnvJAXProcessID   = "JAX_PROCESS_ID"          // Kubeflow Trainer's JAX runtime
	EnvJAXProcesses   = "JAX_NUM_PROCESSES"       //
	EnvJAXCoordinator = "JAX_COORDINATOR_ADDRESS" //

	EnvOMPIRank      = "OMPI_COMM_WORLD_RANK" // Open MPI's mpirun (and the MPI Operator)
	EnvOMPISize      = "OMPI_COMM_WORLD_SIZE"
	EnvOMPILocalRank = "OMPI_COMM_WORLD_LOCAL_RANK"

	EnvSlurmProcID  = "SLURM_PROCID" // srun
	EnvSlurmNTasks  = "SLURM_NTASKS"
	EnvSlurmLocalID = "SLURM_LOCALID"
	// EnvPMIxRank is set by a PMIx server for the processes it wires up: beside Slurm's
	// variables it means srun --mpi=pmix, whose processes are MPI ranks.
	EnvPMIxRank = "PMIX_RANK"

	EnvTorchRank      = "RANK" // torchrun and launchers that copy its names
	EnvTorchWorldSize = "WORLD_SIZE"
	EnvTorchLocalRank = "LOCAL_RANK"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"

	EnvJobIndex = "JOB_COMPLETION_INDEX" // a Kubernetes indexed Job; the world size is NITRO_WORLD_SIZE
)

// The sources FromEnv names in Dist.Source, in the order it tries them.
const (
	SourceNone     = ""            // no launcher variable: one process
	SourceNitro    = "nitro"       // NITRO_RANK, NITRO_WORLD_SIZE
	SourceJAX      = "jax"         // JAX_PROCESS_ID, JAX_NUM_PROCESSES
	SourceOpenMPI  = "openmpi"     // OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
	SourceSlurm    = "slurm"       // SLURM_PROCID, SLURM_NTASKS
	SourceSlurmMPI = "slurm+pmix"  // SLURM_PROCID, SLURM_NTASKS and PMIX_RANK: srun --mpi=pmix
	SourceTorchrun = "torchrun"    // RANK, WORLD_SIZE
	SourceJob      = "indexed-job" // JOB_COMPLETION_INDEX with NITRO_WORLD_SIZE
)

// launcher is one source's variables: the rank's and the world size's (both or neither must be
// set), and optionally the local rank's.
type launcher struct {
	source, rank, size, local string
}

// launchers is FromEnv's order: nitro's own names first (an explicit choice beats an inherited
// one), then the launchers from the most specific to the most generic names (RANK and
// WORLD_SIZE are plain words another tool may set). The indexed Job comes last, as it is a rank
// without a world size.
var launchers = []launcher{
	{SourceNitro, EnvRank, EnvWorldSize, ""},
	{SourceJAX, EnvJAXProcessID, EnvJAXProcesses, ""},
	{SourceOpenMPI, EnvOMPIRank, EnvOMPISize, EnvOMPILocalRank},
	{SourceSlurm, EnvSlurmProcID, EnvSlurmNTasks, EnvSlurmLocalID},
	{SourceTorchrun, EnvTorchRank, EnvTorchWorldSize, EnvTorchLocalRank},
}

// FromEnv reads this process's Dist through lookup (os.LookupEnv when nil) from the first
// launcher whose variables are set, in this order: NITRO_RANK/NITRO_WORLD_SIZE; JAX_PROCESS_ID/
// JAX_NUM_PROCESSES (+ JAX_COORDINATOR_ADDRESS); Open MPI's OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK;
// Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; torchrun's RANK/WORLD_SIZE/LOCAL_RANK (+
// MASTER_ADDR:MASTER_PORT); an indexed Job's JOB_COMPLETION_INDEX, whose world size is
// NITRO_WORLD_SIZE (set it to the Job's completions). None set is Single(). Dist.Source names
// the launcher used.
//
// Every other launcher that is set must agree on the rank and world size: a disagreement is an
// error naming both variables and their values, since training under the wrong rank silently
// duplicates one shard and drops another. One exception: under Open MPI, Slurm's variables are
// ignored, because mpirun started inside a Slurm allocation inherits the batch step's
// SLURM_PROCID (0 on every rank). One variable of a pair without the other, a value that is not
// an integer, or a rank outside [0, world) is an error naming the variable and its value.
func FromEnv(lookup func(string) (string, bool)) (Dist, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var found []Dist
	var from []launcher
	for _, l := range launchers {
		d, ok, err := l.read(lookup)
		if err != nil {
			return Dist{}, err
		}
		if ok {
			found, from = append(found, d), append(from, l)
		}
	}
	if js, ok := lookup(EnvJobIndex); ok {
		d, err := jobDist(js, lookup)
		if err != nil {
			return Dist{}, err
		}
		found, from = append(found, d), append(from, launcher{SourceJob, EnvJobIndex, EnvWorldSize, ""})
	}
	if len(found) == 0 {
		return Single(), nil
	}
	d, l := found[0], from[0]
	for i := 1; i < len(found); i++ {
		o, ol := found[i], from[i]
		if l.source == SourceOpenMPI && ol.source == SourceSlurm {
			continue
		}
		if o.Rank != d.Rank {
			return Dist{}, fmt.Errorf("%s=%d and %s=%d disagree on this process's rank: unset the launcher's variables that are not this run's (%s is read first)", l.rank, d.Rank, ol.rank, o.Rank, l.rank)
		}
		if o.WorldSize != d.WorldSize {
			return Dist{}, fmt.Errorf("%s=%d and %s=%d disagree on the world size: unset the launcher's variables that are not this run's (%s is read first)", l.size, d.WorldSize, ol.size, o.WorldSize, l.size)
		}
	}
	if p, ok := lookup(EnvPMIxRank); ok && d.Source == SourceSlurm {
		if p != strconv.Itoa(d.Rank) {
			return Dist{}, fmt.Errorf("%s=%q and %s=%d disagree on this process's rank: unset the variables that are not this run's", EnvPMIxRank, p, EnvSlurmProcID, d.Rank)
		}
		d.Source = SourceSlurmMPI
	}
	d.Coordinator = coordinator(d.Source, lookup)
	if a, ok := lookup(EnvCoordinator); ok && d.Coordinator == "" {
		d.Coordinator = a
	}
	return d, nil
}

// read is l's Dist when its variables are set (ok), or an error naming the variable at fault.
func (l launcher) read(lookup func(string) (string, bool)) (d Dist, ok bool, err error) {
	rs, rok := lookup(l.rank)
	ws, wok := lookup(l.size)
	switch {
	case !rok && !wok:
		return Dist{}, false, nil
	case !wok:
		return Dist{}, false, fmt.Errorf("%s=%q is set and %s is not: set both (the rank and how many processes the run spans), or neither for one process", l.rank, rs, l.size)
	case !rok && l.source == SourceNitro:
		if _, job := lookup(EnvJobIndex); job {
			return Dist{}, false, nil // the indexed Job's world size: read with JOB_COMPLETION_INDEX
		}
		fallthrough
	case !rok:
		return Dist{}, false, fmt.Errorf("%s=%q is set and %s is not: set both (this process's rank in [0, %s) and the world size), or neither for one process", l.size, ws, l.rank, ws)
	}
	w, err := strconv.Atoi(strings.TrimSpace(ws))
	if err != nil || w < 1 {
		return Dist{}, false, fmt.Errorf("%s=%q: want an integer >= 1, the number of processes the run spans", l.size, ws)
	}
	r, err := strconv.Atoi(strings.TrimSpace(rs))
	if err != nil || r < 0 || r >= w {
		return Dist{}, false, fmt.Errorf("%s=%q with %s=%d: want an integer in [0, %d)", l.rank, rs, l.size, w, w)
	}
	d = Dist{Rank: r, WorldSize: w, Source: l.source}
	if l.local != "" {
		if ls, ok := lookup(l.local); ok {
			lr, err := strconv.Atoi(strings.TrimSpace(ls))
			if err != nil || lr < 0 || lr >= w {
				return Dist{}, false, fmt.Errorf("%s=%q with %s=%d: want an integer in [0, %d)", l.local, ls, l.size, w, w)
			}
			d.LocalRank = lr
		}
	}
	return d, true, nil
}

// jobDist is an indexed Job's Dist: the index is the rank, NITRO_WORLD_SIZE the world size
// (a Job's completions count reaches no variable of its own).
func jobDist(js string, lookup func(string) (string, bool)) (Dist, error) {
	ws, ok := lookup(EnvWorldSize)
	if !ok {
		return Dist{}, fmt.Errorf("%s=%q is set and %s is not: an indexed Job's pods need the world size too; set %s to the Job's .spec.completions in the pod template", EnvJobIndex, js, EnvWorldSize, EnvWorldSize)
	}
	l := launcher{SourceJob, EnvJobIndex, EnvWorldSize, ""}
	d, _, err := l.read(func(k string) (string, bool) {
		if k == EnvJobIndex {
			return js, true
		}
		if k == EnvWorldSize {
			return ws, true
		}
		return "", false
	})
	return d, err
}

// coordinator is where the launcher says rank 0 listens, when it says: JAX's address, or
// torchrun's MASTER_ADDR:MASTER_PORT. MPI needs none (mpirun wires the ranks up).
func coordinator(source string, lookup func(string) (string, bool)) string {
	switch source {
	case SourceJAX:
		a, _ := lookup(EnvJAXCoordinator)
		return a
	case SourceTorchrun:
		a, aok := lookup(EnvMasterAddr)
		p, pok := lookup(EnvMasterPort)
		if aok && pok {
			return a + ":" + p
		}
		return a
	}
	return ""
}
