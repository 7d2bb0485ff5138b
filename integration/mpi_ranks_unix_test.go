//go:build unix

package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
)

// evaluations reads the "evaluation" lines of --log-format json output (one per rank under
// mpirun), each as its metrics by name.
func evaluations(t *testing.T, out []byte) []map[string]float64 {
	t.Helper()
	var got []map[string]float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.IndexByte(line, '{'); i > 0 {
			line = line[i:] // mpirun's --tag-output prefix
		}
		var rec map[string]any
		if json.Unmarshal(line, &rec) != nil || rec["msg"] != "evaluation" {
			continue
		}
		m := map[string]float64{}
		for k, v := range rec {
			if f, ok := v.(float64); ok {
				m[k] = f
			}
		}
		got = append(got, m)
	}
	return got
}

// TestMPIEvaluatesAnyRankCount: evaluation is sharded by samples, so `mpirun -np W nitro evaluate`
// works for any W up to the eval batch and reports, on every rank, what one process reports on
// the same checkpoint: the tiny preset's val split (2 batches of 500) over 2, 3, 4 and 5 ranks
// (shares of 250, 166-167, 125 and 100 rows), each metric within 1e-6 relative: a batch's sums
// are float32 on the device, and a rank sums its share of the rows (measured: val_loss differs
// in the 8th digit, the accuracies not at all). And `mpirun -np 4 nitro train mnist-mlp --preset tiny`, which failed
// at validation when ranks 2 and 3 got no val batch, trains, validates and tests.
func TestMPIEvaluatesAnyRankCount(t *testing.T) {
	m := newMPIRun(t)
	ctx, runDir := m.run(t)
	if out, err := m.command(ctx, m.bin, "train", "mnist-mlp", "--preset", "tiny", "--run-dir", runDir, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, tail(out))
	}
	evaluate := []string{"evaluate", "mnist-mlp", "--checkpoint", runDir, "--split", "val", "--no-progress", "--log-format", "json"}
	out, err := m.command(ctx, m.bin, evaluate...).CombinedOutput()
	if err != nil {
		t.Fatalf("evaluate: %v\n%s", err, tail(out))
	}
	one := evaluations(t, out)
	if len(one) != 1 || one[0]["val_loss"] == 0 || one[0]["val_accuracy"] == 0 {
		t.Fatalf("one process: %d evaluation lines %v, want one with val_loss and val_accuracy:\n%s", len(one), one, tail(out))
	}
	for world := 2; world <= 5; world++ {
		t.Run(fmt.Sprintf("np%d", world), func(t *testing.T) {
			ctx, _ := m.run(t)
			args := append(append(slices.Clone(mpirunArgs), "-np", strconv.Itoa(world), m.bin), evaluate...)
			out, err := m.command(ctx, m.mpirun, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("mpirun: %v\n%s", err, tail(out))
			}
			ranks := evaluations(t, out)
			if len(ranks) != world {
				t.Fatalf("%d evaluation lines, want one per rank (%d):\n%s", len(ranks), world, tail(out))
			}
			for r, got := range ranks {
				for name, want := range one[0] {
					if g, ok := got[name]; !ok || math.Abs(g-want) > 1e-6*math.Abs(want) {
						t.Errorf("line %d: %s = %v, one process %v", r, name, g, want)
					}
				}
			}
		})
	}
	t.Run("train-np4", func(t *testing.T) {
		ctx, dir := m.run(t)
		args := append(append(slices.Clone(mpirunArgs), "-np", "4", m.bin), "train", "mnist-mlp", "--preset", "tiny", "--run-dir", dir, "--no-progress")
		out, err := m.command(ctx, m.mpirun, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mpirun -np 4 train: %v\n%s", err, tail(out))
		}
		epochs := rankEpochLines(out)
		if len(epochs) != 4 || vals(epochs[0]) == "" {
			t.Fatalf("epoch lines from %d ranks, want 4 with val metrics:\n%s", len(epochs), tail(out))
		}
		for r := 1; r < 4; r++ {
			if vals(epochs[r]) != vals(epochs[0]) {
				t.Errorf("rank %d's val metrics %q, rank 0's %q", r, vals(epochs[r]), vals(epochs[0]))
			}
		}
		if !bytes.Contains(out, []byte("test: ")) {
			t.Errorf("no test split result:\n%s", tail(out))
		}
	})
}

// TestLaunchersWithoutMPI: srun --mpi=pmix starts Open MPI's processes as MPI ranks with Slurm's
// rank variables and PMIx's, and no OMPI_COMM_WORLD_*; nitro opens MPI there and trains one model.
// mpirun plays srun here (its processes have PMIX_RANK; a wrapper trades Open MPI's rank
// variables for Slurm's): Slurm itself is not on this machine. Without PMIx (srun with no MPI
// plugin) the same launch is refused, naming the launcher and the ways to one model, unless
// --independent-ranks asks for a model per process.
func TestLaunchersWithoutMPI(t *testing.T) {
	m := newMPIRun(t)
	ctx, runDir := m.run(t)
	wrapper := func(keepPMIx bool) string {
		script := "#!/bin/sh\nexport SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_NTASKS=$OMPI_COMM_WORLD_SIZE SLURM_LOCALID=$OMPI_COMM_WORLD_LOCAL_RANK\n" +
			"unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK\n"
		if !keepPMIx {
			script += "unset PMIX_RANK\n"
		}
		p := filepath.Join(t.TempDir(), "srun.sh")
		if err := os.WriteFile(p, []byte(script+"exec \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	launch := func(ctx context.Context, keepPMIx bool, dir string, more ...string) ([]byte, error) {
		args := append(append(slices.Clone(mpirunArgs), "-np", "2", wrapper(keepPMIx), m.bin), trainArgs(dir, more...)...)
		return m.command(ctx, m.mpirun, args...).CombinedOutput()
	}
	out, err := launch(ctx, true, runDir)
	if err != nil {
		t.Fatalf("srun --mpi=pmix, played by mpirun: %v\n%s", err, tail(out))
	}
	for r := range 2 {
		if want := fmt.Sprintf("rank %d of 2 (slurm+pmix), gradients and validation summed over 2 processes", r); !bytes.Contains(out, []byte(want)) {
			t.Errorf("no config report line %q:\n%s", want, tail(out))
		}
	}
	out, err = launch(ctx, false, filepath.Join(t.TempDir(), "plain"))
	if err == nil {
		t.Fatalf("srun without PMIx trained:\n%s", tail(out))
	}
	for _, want := range []string{"launched by slurm, has no collective", "srun --mpi=pmix", "--independent-ranks"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, tail(out))
		}
	}
	out, err = launch(ctx, false, filepath.Join(t.TempDir(), "independent"), "--independent-ranks")
	if err != nil {
		t.Fatalf("srun without PMIx, --independent-ranks: %v\n%s", err, tail(out))
	}
	if !bytes.Contains(out, []byte("no collective: each process trains its own model")) {
		t.Errorf("independent ranks are not said in the config report:\n%s", tail(out))
	}
}

// TestMPIResumeAfterARankIsKilled: `mpirun -np 2` training, rank 1 (not the writer) SIGKILLed
// part-way through an epoch after a checkpoint: the launcher ends rank 0 within killedRunEnds'
// bound, the run dir holds whole files only, and `--resume auto` under the same mpirun continues
// bitwise: every step's loss and the final checkpoint's tensors equal the uninterrupted run's.
func TestMPIResumeAfterARankIsKilled(t *testing.T) {
	m := newMPIRun(t)
	ctx, dir := m.run(t)
	multi := func(runDir string, more ...string) *exec.Cmd {
		args := append(append(slices.Clone(mpirunArgs), "-np", "2", m.bin), trainArgs(runDir, append([]string{"--set", "BatchSize=16"}, more...)...)...)
		return m.command(ctx, m.mpirun, args...)
	}
	ref := dir + "-ref"
	if out, err := multi(ref).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, tail(out))
	}
	want := readRecord(t, ref)
	at := stopPartWay(t, multi, dir, 2, wayToStop{name: "rank1-killed", sigs: []syscall.Signal{syscall.SIGKILL}, rank: 1})
	noLeftovers(t, at.runDir)
	out, err := multi(at.runDir, "--resume", "auto").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, tail(out))
	}
	got := readRecord(t, at.runDir)
	order := append(stepRange(1, at.logged), stepRange(at.Step+1, len(want.steps))...)
	if !slices.Equal(got.steps, order) {
		t.Fatalf("train lines are steps %s, want %s", spans(got.steps), spans(order))
	}
	for i, s := range got.steps {
		if got.loss[i] != want.loss[s-1] {
			t.Errorf("step %d: loss %v after the kill and resume, %v uninterrupted: want them bitwise equal", s, got.loss[i], want.loss[s-1])
		}
	}
	a, b := lastCheckpoint(t, at.runDir), lastCheckpoint(t, ref)
	if a.Step != b.Step || len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("last checkpoints at steps %d and %d, %d and %d tensors", a.Step, b.Step, len(a.Tensors), len(b.Tensors))
	}
	for i, x := range a.Tensors {
		if y := b.Tensors[i]; x.Name != y.Name || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("tensor %s differs from the uninterrupted run's %s", x.Name, y.Name)
		}
	}
	noLeftovers(t, at.runDir)
}

// lastCheckpoint reads runDir's newest checkpoint.
func lastCheckpoint(t *testing.T, runDir string) *checkpoint.Record {
	t.Helper()
	path, ok, err := checkpoint.Newest(runDir)
	if err != nil || !ok {
		t.Fatalf("%s: no newest checkpoint (%v)", runDir, err)
	}
	rec, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// plainEpochLines is one process's epoch lines ("epoch 1/2 ..."), as its console prints them.
func plainEpochLines(out []byte) []string {
	re := regexp.MustCompile(`^(epoch \d+/\d+ .*)$`)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if g := re.FindStringSubmatch(sc.Text()); g != nil {
			lines = append(lines, g[1])
		}
	}
	return lines
}

// closeVals compares two vals strings ("val_loss 0.4134 val_accuracy 0.8860 ...") name by name,
// each value within tol (absolute, for printed digits), and requires the same names.
func closeVals(a, b string, tol float64) error {
	parse := func(s string) ([]string, map[string]float64) {
		f := strings.Fields(s)
		var names []string
		m := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				v = math.NaN()
			}
			names, m[f[i]] = append(names, f[i]), v
		}
		return names, m
	}
	na, ma := parse(a)
	nb, mb := parse(b)
	if len(na) == 0 || !slices.Equal(na, nb) {
		return fmt.Errorf("metrics %q and %q", a, b)
	}
	for _, n := range na {
		if !(math.Abs(ma[n]-mb[n]) <= tol) {
			return fmt.Errorf("%s is %v and %v", n, ma[n], mb[n])
		}
	}
	return nil
}
