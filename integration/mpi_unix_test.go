//go:build unix

package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
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
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/internal/prereq"
)

// mpiRun is what the multi-process tests share: the nitro binary, built once, and the
// environment its runs need.
type mpiRun struct {
	bin, mpirun string
	env         []string
}

// newMPIRun builds cmd/nitro and finds mpirun, MNIST and the XLA plugin, or stops the test
// (prereq: skipped outside CI naming the install, failed under CI).
func newMPIRun(t testing.TB) mpiRun {
	requireXLA(t)
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		prereq.OpenMPI.Absent(t, err)
	}
	if _, err := mnist.DataDir(""); err != nil {
		prereq.MNIST.Absent(t, err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nitro")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nitro")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/nitro: %v\n%s", err, out)
	}
	// The one-process reference runs on 4 devices and the ranks on 2: unless told, the plugin
	// presents one per CPU the process may run on when that is under 4 (backend.EnvCPUDevices),
	// and mpirun binds each rank to one core, so it is told.
	env := append(os.Environ(), "NITRO_PJRT_DIR="+filepath.Dir(prereq.Plugin(t)), "NITRO_CPU_DEVICES=4")
	return mpiRun{bin: bin, mpirun: mpirun, env: env}
}

// mpirunArgs are the launcher's flags: as root Open MPI needs --allow-run-as-root, and 4 ranks
// on a 2-core machine need --oversubscribe; --tag-output prefixes each line with its rank.
var mpirunArgs = []string{"--allow-run-as-root", "--oversubscribe", "--tag-output"}

// trainArgs is `nitro train mnist-mlp --preset tiny` into runDir with more flags.
func trainArgs(runDir string, more ...string) []string {
	return append([]string{"train", "mnist-mlp", "--preset", "tiny", "--run-dir", runDir, "--no-progress", "--set", "EvalBatchSize=200"}, more...)
}

// run is a test's context (docTimeout stops a hang) and a fresh run dir.
func (m mpiRun) run(t testing.TB) (context.Context, string) {
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	t.Cleanup(cancel)
	return ctx, filepath.Join(t.TempDir(), "run")
}

func (m mpiRun) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Env = m.env
	return c
}

// TestMPIMatchesOneProcessOnLocalDevices: `mpirun -np W nitro train mnist-mlp --preset tiny`
// (BatchSize B per rank, on D local devices each) ends where one process on W*D local devices
// with BatchSize W*B ends: the final checkpoint's tensors within 1e-5, every step's loss within
// 1e-5, the same val metrics on every rank, and one record written, by rank 0 (one params line,
// one train line per step).
func TestMPIMatchesOneProcessOnLocalDevices(t *testing.T) {
	m := newMPIRun(t)
	for _, c := range []struct{ world, batch, devs int }{{2, 128, 1}, {4, 64, 1}, {2, 128, 2}} {
		t.Run(fmt.Sprintf("np%d-devices%d", c.world, c.devs), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
			defer cancel()
			dir := t.TempDir()
			multi, single := filepath.Join(dir, "multi"), filepath.Join(dir, "single")
			args := append(append(slices.Clone(mpirunArgs), "-np", strconv.Itoa(c.world), m.bin),
				trainArgs(multi, "--set", fmt.Sprintf("BatchSize=%d", c.batch), "--devices", strconv.Itoa(c.devs))...)
			out, err := m.command(ctx, m.mpirun, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("mpirun: %v\n%s", err, tail(out))
			}
			ref, err := m.command(ctx, m.bin, trainArgs(single, "--set", fmt.Sprintf("BatchSize=%d", c.world*c.batch), "--devices", strconv.Itoa(c.world*c.devs))...).CombinedOutput()
			if err != nil {
				t.Fatalf("one process: %v\n%s", err, tail(ref))
			}
			if !bytes.Contains(out, []byte(fmt.Sprintf("processes            rank 0 of %d (openmpi), gradients and validation summed over %d processes", c.world, c.world))) {
				t.Errorf("rank 0's config report does not say the processes:\n%s", tail(out))
			}
			// Every rank prints its epoch lines: the same val metrics on each.
			epochs := rankEpochLines(out)
			if len(epochs) != c.world {
				t.Fatalf("epoch lines from %d ranks, want %d:\n%s", len(epochs), c.world, tail(out))
			}
			for r := 1; r < c.world; r++ {
				if vals(epochs[r]) != vals(epochs[0]) || vals(epochs[0]) == "" {
					t.Errorf("rank %d's val metrics %q, rank 0's %q", r, vals(epochs[r]), vals(epochs[0]))
				}
			}
			got, want := readRecord(t, multi), readRecord(t, single)
			if got.params != 1 {
				t.Errorf("%d params lines, want 1: only rank 0 writes", got.params)
			}
			if len(got.loss) != len(want.loss) || len(got.loss) == 0 {
				t.Fatalf("%d train lines, one process %d", len(got.loss), len(want.loss))
			}
			for i := range got.loss {
				if got.steps[i] != i+1 {
					t.Fatalf("train line %d is step %d: one train line per step, from one rank", i, got.steps[i])
				}
				if math.Abs(got.loss[i]-want.loss[i]) > 1e-5 {
					t.Errorf("step %d: loss %.8g over %d processes, %.8g on %d devices", i+1, got.loss[i], c.world, want.loss[i], c.world*c.devs)
				}
			}
			compareFinal(t, multi, single)
		})
	}
}

// rankEpochLines is each rank's "epoch" lines, from mpirun's --tag-output "[job,rank]<stdout>:".
func rankEpochLines(out []byte) map[int][]string {
	re := regexp.MustCompile(`^\[\d+,(\d+)\]<stdout>:\s*(epoch \d+/\d+ .*)$`)
	lines := map[int][]string{}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		if g := re.FindStringSubmatch(s.Text()); g != nil {
			r, _ := strconv.Atoi(g[1])
			lines[r] = append(lines[r], g[2])
		}
	}
	return lines
}

// vals is the val_ fields of epoch lines, joined.
func vals(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		for _, f := range regexp.MustCompile(`val_\w+ \S+`).FindAllString(l, -1) {
			b.WriteString(f + " ")
		}
	}
	return b.String()
}

// record is what a run's metrics.jsonl says: how many params lines, and each train line's step
// and loss.
type record struct {
	params  int
	steps   []int
	loss    []float64
	seconds []float64 // each step's wall time
}

func readRecord(t testing.TB, runDir string) record {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r record
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var line struct {
			Type, Context string
			Step          int
			Loss          float64
			StepSeconds   float64 `json:"step_seconds"`
		}
		if err := json.Unmarshal(s.Bytes(), &line); err != nil {
			t.Fatalf("%s: a torn line %q: %v", runDir, s.Text(), err)
		}
		switch {
		case line.Type == "params":
			r.params++
		case line.Type == "metrics" && line.Context == "train":
			r.steps, r.loss = append(r.steps, line.Step), append(r.loss, line.Loss)
			r.seconds = append(r.seconds, line.StepSeconds)
		}
	}
	return r
}

// compareFinal compares the last checkpoint of two runs, every float32 tensor (parameters and
// optimizer state) within 1e-5.
func compareFinal(t *testing.T, a, b string) {
	t.Helper()
	last := func(dir string) *checkpoint.Record {
		m, err := checkpoint.ReadManifest(dir)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: manifest %v, %v", dir, m, err)
		}
		rec, err := checkpoint.Read(filepath.Join(dir, m[len(m)-1].File))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	ra, rb := last(a), last(b)
	if ra.Step != rb.Step {
		t.Errorf("last checkpoints at steps %d and %d", ra.Step, rb.Step)
	}
	byName := map[string][]byte{}
	for _, x := range rb.Tensors {
		byName[x.Name] = x.Data
	}
	compared := 0
	for _, x := range ra.Tensors {
		y, ok := byName[x.Name]
		if x.DType != "F32" || !ok || len(y) != len(x.Data) {
			if !ok {
				t.Errorf("tensor %s is in one checkpoint only", x.Name)
			}
			continue
		}
		for i := 0; i < len(y); i += 4 {
			p := math.Float32frombits(binary.LittleEndian.Uint32(x.Data[i:]))
			q := math.Float32frombits(binary.LittleEndian.Uint32(y[i:]))
			if math.Abs(float64(p-q)) > 1e-5 {
				t.Errorf("%s[%d]: %g over processes, %g on local devices", x.Name, i/4, p, q)
				break
			}
		}
		compared++
	}
	if compared == 0 {
		t.Error("no float32 tensor compared")
	}
}

// TestMPIRefusesRanksThatDisagree: two ranks given different --set values (mpirun's A : B form)
// are refused before the first step, naming the field and both values; nothing trains.
func TestMPIRefusesRanksThatDisagree(t *testing.T) {
	m := newMPIRun(t)
	ctx, runDir := m.run(t)
	args := append(slices.Clone(mpirunArgs), "-np", "1", m.bin)
	args = append(args, trainArgs(runDir, "--set", "LearningRate=0.01")...)
	args = append(append(args, ":", "-np", "1", m.bin), trainArgs(runDir, "--set", "LearningRate=0.02")...)
	out, err := m.command(ctx, m.mpirun, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("mpirun succeeded:\n%s", tail(out))
	}
	if want := "LearningRate is 0.01 on rank 0 and 0.02 on rank 1"; !bytes.Contains(out, []byte(want)) {
		t.Errorf("output lacks %q:\n%s", want, tail(out))
	}
	if hasTrainLine(filepath.Join(runDir, "metrics.jsonl")) {
		t.Error("a train line was written: the refusal came after a step")
	}
}

// TestMPIStopsWhenARankDies: rank 1 SIGKILLed mid-training makes the run end, with an error
// naming the rank, within 30 s (mpirun notices the dead process and ends the others), never a
// hang; rank 0's record holds no torn line and its run dir no temporary file.
func TestMPIStopsWhenARankDies(t *testing.T) {
	m := newMPIRun(t)
	ctx, runDir := m.run(t)
	args := append(append(slices.Clone(mpirunArgs), "-np", "2", m.bin), trainArgs(runDir, "--max-epochs", "200")...)
	c := m.command(ctx, m.mpirun, args...)
	out, exited := startTraining(t, c, runDir)
	pid := rankPID(t, c.Process.Pid, 1)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-exited:
		if err == nil {
			t.Fatalf("mpirun exited 0 after rank 1 was killed:\n%s", tail(out.Bytes()))
		}
		t.Logf("mpirun ended %v after the kill: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		_ = c.Process.Kill()
		t.Fatalf("the run still ran 30 s after rank 1 was killed:\n%s", tail(out.Bytes()))
	}
	if !regexp.MustCompile(`process rank 1 with PID \d+ .*signal 9`).Match(out.Bytes()) {
		t.Errorf("the error does not name rank 1:\n%s", tail(out.Bytes()))
	}
	readRecord(t, runDir) // fails on a torn line
	ents, _ := os.ReadDir(runDir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}
}

// rankPID finds the child of mpirun whose environment says OMPI_COMM_WORLD_RANK=rank.
func rankPID(t *testing.T, parent, rank int) int {
	t.Helper()
	want := []byte(fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d\x00", rank))
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// stat: "pid (comm) state ppid ..."; comm may hold spaces, so read after the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err == nil && bytes.Contains(env, want) {
			return pid
		}
	}
	t.Fatalf("no child of mpirun (pid %d) is rank %d", parent, rank)
	return 0
}

// BenchmarkMPIStep: per step of `mpirun -np 2 nitro train mnist-mlp --preset tiny` (batch 128
// per rank), the all-reduce's bytes and time (timed alone, by integration/testdata/allreduce,
// on the step's buffer: the gradient, the loss and the stop vote) against the step's wall time,
// and the step of one process on the same per-rank batch.
func BenchmarkMPIStep(b *testing.B) {
	m := newMPIRun(b)
	ctx, dir := m.run(b)
	tool := filepath.Join(b.TempDir(), "allreduce")
	build := exec.Command("go", "build", "-o", tool, "./integration/testdata/allreduce")
	build.Dir, _ = filepath.Abs("..")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./integration/testdata/allreduce: %v\n%s", err, out)
	}
	const values = 784*64 + 64 + 64*10 + 10 // the tiny preset's parameters
	for b.Loop() {
		multi, single := dir+"-np2", dir+"-np1"
		args := append(append(slices.Clone(mpirunArgs), "-np", "2", m.bin), trainArgs(multi, "--max-epochs", "1")...)
		if out, err := m.command(ctx, m.mpirun, args...).CombinedOutput(); err != nil {
			b.Fatalf("mpirun: %v\n%s", err, tail(out))
		}
		if out, err := m.command(ctx, m.bin, trainArgs(single, "--max-epochs", "1")...).CombinedOutput(); err != nil {
			b.Fatalf("one process: %v\n%s", err, tail(out))
		}
		out, err := m.command(ctx, m.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", tool, "-n", strconv.Itoa(values+2)).CombinedOutput()
		if err != nil {
			b.Fatalf("allreduce: %v\n%s", err, out)
		}
		g := regexp.MustCompile(`bytes=(\d+) median_s=(\S+)`).FindSubmatch(out)
		if g == nil {
			b.Fatalf("allreduce printed %q", out)
		}
		bytesPer, _ := strconv.Atoi(string(g[1]))
		reduce, _ := strconv.ParseFloat(string(g[2]), 64)
		step2 := median(readRecord(b, multi).seconds[1:]) // the first step compiles
		step1 := median(readRecord(b, single).seconds[1:])
		b.ReportMetric(float64(bytesPer), "allreduce-bytes/step")
		b.ReportMetric(reduce*1e6, "allreduce-us/step")
		b.ReportMetric(step2*1e3, "np2-ms/step")
		b.ReportMetric(step1*1e3, "np1-ms/step")
		b.ReportMetric(reduce/step2, "allreduce/step")
		_ = os.RemoveAll(multi)
		_ = os.RemoveAll(single)
	}
}
