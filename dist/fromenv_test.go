package dist

import (
	"strings"
	"testing"
)

// TestFromEnvEachLauncher reads each launcher's variables alone, as that launcher sets them.
func TestFromEnvEachLauncher(t *testing.T) {
	for _, c := range []struct {
		name string
		kv   map[string]string
		want Dist
	}{
		{"nitro", map[string]string{EnvRank: "2", EnvWorldSize: "3"}, Dist{Rank: 2, WorldSize: 3, Source: SourceNitro}},
		{"jax", map[string]string{EnvJAXProcessID: "1", EnvJAXProcesses: "2", EnvJAXCoordinator: "host0:1234"},
			Dist{Rank: 1, WorldSize: 2, Source: SourceJAX, Coordinator: "host0:1234"}},
		{"openmpi", map[string]string{EnvOMPIRank: "3", EnvOMPISize: "4", EnvOMPILocalRank: "1"},
			Dist{Rank: 3, WorldSize: 4, LocalRank: 1, Source: SourceOpenMPI}},
		{"slurm", map[string]string{EnvSlurmProcID: "5", EnvSlurmNTasks: "8", EnvSlurmLocalID: "1"},
			Dist{Rank: 5, WorldSize: 8, LocalRank: 1, Source: SourceSlurm}},
		{"torchrun", map[string]string{EnvTorchRank: "1", EnvTorchWorldSize: "2", EnvTorchLocalRank: "1", EnvMasterAddr: "10.0.0.1", EnvMasterPort: "29500"},
			Dist{Rank: 1, WorldSize: 2, LocalRank: 1, Source: SourceTorchrun, Coordinator: "10.0.0.1:29500"}},
		{"indexed job", map[string]string{EnvJobIndex: "3", EnvWorldSize: "4"}, Dist{Rank: 3, WorldSize: 4, Source: SourceJob}},
		// NITRO_COORDINATOR fills in for launchers that give no address, never over one that does.
		{"slurm with coordinator", map[string]string{EnvSlurmProcID: "1", EnvSlurmNTasks: "2", EnvCoordinator: "node0:7000"},
			Dist{Rank: 1, WorldSize: 2, Source: SourceSlurm, Coordinator: "node0:7000"}},
		{"jax address wins", map[string]string{EnvJAXProcessID: "0", EnvJAXProcesses: "2", EnvJAXCoordinator: "host0:1234", EnvCoordinator: "other:1"},
			Dist{Rank: 0, WorldSize: 2, Source: SourceJAX, Coordinator: "host0:1234"}},
		// Agreeing launchers: the first in the order is the one named.
		{"nitro over openmpi", map[string]string{EnvRank: "1", EnvWorldSize: "2", EnvOMPIRank: "1", EnvOMPISize: "2"}, Dist{Rank: 1, WorldSize: 2, Source: SourceNitro}},
		// mpirun inside a Slurm allocation: every rank inherits the batch step's SLURM_PROCID=0.
		{"openmpi in slurm", map[string]string{EnvOMPIRank: "1", EnvOMPISize: "2", EnvSlurmProcID: "0", EnvSlurmNTasks: "1"}, Dist{Rank: 1, WorldSize: 2, Source: SourceOpenMPI}},
		// srun --mpi=pmix: Slurm's PMIx server wires the processes up as MPI ranks.
		{"slurm with pmix", map[string]string{EnvSlurmProcID: "2", EnvSlurmNTasks: "4", EnvPMIxRank: "2"}, Dist{Rank: 2, WorldSize: 4, Source: SourceSlurmMPI}},
		// mpirun sets PMIX_RANK too: the source stays Open MPI's.
		{"openmpi with pmix", map[string]string{EnvOMPIRank: "1", EnvOMPISize: "2", EnvPMIxRank: "1"}, Dist{Rank: 1, WorldSize: 2, Source: SourceOpenMPI}},
	} {
		d, err := FromEnv(env(c.kv))
		if err != nil || d != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.name, d, err, c.want)
		}
		if err == nil && d.Validate() != nil {
			t.Errorf("%s: %+v does not validate", c.name, d)
		}
	}
}

// TestFromEnvRefuses: contradictions name both variables and values; a half-set or malformed
// launcher names its variable.
// MPIRanks: only mpirun's and srun --mpi=pmix's processes can open MPI among themselves.
func TestMPIRanks(t *testing.T) {
	for src, want := range map[string]bool{SourceOpenMPI: true, SourceSlurmMPI: true, SourceSlurm: false, SourceTorchrun: false, SourceJAX: false, SourceNone: false} {
		if got := (Dist{Rank: 0, WorldSize: 2, Source: src}).MPIRanks(); got != want {
			t.Errorf("source %q: MPIRanks %v, want %v", src, got, want)
		}
	}
	if _, err := FromEnv(env(map[string]string{EnvSlurmProcID: "1", EnvSlurmNTasks: "2", EnvPMIxRank: "0"})); err == nil || !strings.Contains(err.Error(), `PMIX_RANK="0" and SLURM_PROCID=1 disagree`) {
		t.Errorf("a PMIx rank other than Slurm's: %v, want a refusal naming both", err)
	}
}

func TestFromEnvRefuses(t *testing.T) {
	for _, c := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{EnvRank: "0", EnvWorldSize: "2", EnvOMPIRank: "1", EnvOMPISize: "2"}, "NITRO_RANK=0 and OMPI_COMM_WORLD_RANK=1 disagree on this process's rank"},
		{map[string]string{EnvJAXProcessID: "0", EnvJAXProcesses: "2", EnvTorchRank: "0", EnvTorchWorldSize: "4"}, "JAX_NUM_PROCESSES=2 and WORLD_SIZE=4 disagree on the world size"},
		{map[string]string{EnvSlurmProcID: "1", EnvSlurmNTasks: "2", EnvTorchRank: "0", EnvTorchWorldSize: "2"}, "SLURM_PROCID=1 and RANK=0 disagree"},
		{map[string]string{EnvOMPIRank: "1", EnvOMPISize: "2", EnvJobIndex: "0", EnvWorldSize: "2"}, "OMPI_COMM_WORLD_RANK=1 and JOB_COMPLETION_INDEX=0 disagree"},
		{map[string]string{EnvOMPIRank: "1"}, `OMPI_COMM_WORLD_RANK="1" is set and OMPI_COMM_WORLD_SIZE is not`},
		{map[string]string{EnvSlurmNTasks: "2"}, `SLURM_NTASKS="2" is set and SLURM_PROCID is not`},
		{map[string]string{EnvOMPIRank: "1", EnvOMPISize: "2", EnvOMPILocalRank: "x"}, `OMPI_COMM_WORLD_LOCAL_RANK="x"`},
		{map[string]string{EnvTorchRank: "4", EnvTorchWorldSize: "4"}, `RANK="4" with WORLD_SIZE=4: want an integer in [0, 4)`},
		{map[string]string{EnvJAXProcessID: "0", EnvJAXProcesses: "zero"}, `JAX_NUM_PROCESSES="zero": want an integer >= 1`},
		{map[string]string{EnvJobIndex: "1"}, `JOB_COMPLETION_INDEX="1" is set and NITRO_WORLD_SIZE is not`},
		{map[string]string{EnvJobIndex: "4", EnvWorldSize: "4"}, `JOB_COMPLETION_INDEX="4" with NITRO_WORLD_SIZE=4`},
		{map[string]string{EnvJobIndex: "1", EnvRank: "2", EnvWorldSize: "4"}, "NITRO_RANK=2 and JOB_COMPLETION_INDEX=1 disagree"},
	} {
		_, err := FromEnv(env(c.kv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.kv, err, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	if got := Single().Describe(); got != "rank 0 of 1 (no launcher)" {
		t.Errorf("Single: %q", got)
	}
	if got := (Dist{Rank: 1, WorldSize: 4, Source: SourceOpenMPI}).Describe(); got != "rank 1 of 4 (openmpi)" {
		t.Errorf("openmpi: %q", got)
	}
}
