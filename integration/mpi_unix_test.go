//go:build unix

package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path"
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
	bin := buildProgram(t, "./cmd/nitro")
	// The one-process reference runs on 4 devices and the ranks on 2: unless told, the plugin
	// presents one per CPU the process may run on when that is under 4 (backend.EnvCPUDevices),
	// and mpirun binds each rank to one core, so it is told.
	env := append(os.Environ(), "NITRO_PJRT_DIR="+filepath.Dir(prereq.Plugin(t)), "NITRO_CPU_DEVICES=4")
	return mpiRun{bin: bin, mpirun: mpirun, env: env}
}

// mpirunArgs are the launcher's flags: as root Open MPI needs --allow-run-as-root, and 4 ranks
// on a 2-core machine need --oversubscribe; --tag-output prefixes each line with its rank.
var mpirunArgs = []string{"--allow-run-as-root", "--oversubscribe", "--tag-output"}

// trainArgs is `nitro train mnist-mlp --preset tiny` into runDir with more flags. The preset's
// eval batch (500) stands: each rank evaluates its share of every batch's samples.
func trainArgs(runDir string, more ...string) []string {
	return append([]string{"train", "mnist-mlp", "--preset", "tiny", "--run-dir", runDir, "--no-progress"}, more...)
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
			// And the one process's, as printed (4 digits; the sums are float32 and a rank sums
			// its share of each batch, so a last digit may round the other way).
			if err := closeVals(vals(epochs[0]), vals(plainEpochLines(ref)), 2e-4); err != nil {
				t.Errorf("val metrics over %d processes against one process on %d devices: %v", c.world, c.world*c.devs, err)
			}
			got, want := readRecord(t, multi), readRecord(t, single)
			if got.params != 1 {
				t.Errorf("%d params lines, want 1: only rank 0 writes", got.params)
			}
			sameSteps(t, got, want, stepRange(1, len(want.steps)), fmt.Sprintf("over %d processes", c.world), fmt.Sprintf("on %d devices", c.world*c.devs))
			compareFinal(t, multi, single)
		})
	}
}

// TestMPIResumeAcrossWorldSizes: a run stopped part-way through its first epoch (a SIGINT: the
// ranks vote to stop at one step boundary and checkpoint there) resumes under another world size
// at the same global batch: `mpirun -np 2` (BatchSize 16 each) on 1 process with 2 local devices
// (BatchSize 32), and the other way round. The run dir's record then holds every step of the
// uninterrupted run once (no batch trained twice or skipped), each loss within 1e-5 of the
// uninterrupted run's on 1 process with 2 devices, and the final checkpoint's tensors within 1e-5.
func TestMPIResumeAcrossWorldSizes(t *testing.T) {
	resumeAcrossWorldSizes(t, []wayToStop{{name: "", sigs: []syscall.Signal{syscall.SIGINT}}})
}

// TestMPIResumeAfterKillAcrossWorldSizes: the same for a run SIGKILLed part-way through an epoch:
// under mpirun rank 0 is killed (the rank that writes the record and the checkpoints), and mpirun
// must then end rank 1 within 30 s. The resume starts from the newest checkpoint the kill left
// (its step named), and the record, append-only, holds the steps after it twice, the killed run's
// lines then the resumed run's: steps 1..K, then the checkpoint's step + 1 up to the end. Every
// line's loss (a step's last one included) is within 1e-5 of the uninterrupted run's, the final
// tensors too, and the run dir holds no temporary file and exactly the checkpoints its manifest
// lists. The CLI checkpoints only at an epoch's end and at a graceful stop (no step-interval
// policy), so the newest checkpoint is either epoch 1's end (the kill lands in epoch 2) or, for a
// run stopped by SIGINT part-way through epoch 1 and resumed in the same world size before the
// kill, that stop's: the position the resume maps onto the other world size is then mid-epoch.
func TestMPIResumeAfterKillAcrossWorldSizes(t *testing.T) {
	resumeAcrossWorldSizes(t, []wayToStop{
		{name: "epoch-end-checkpoint", sigs: []syscall.Signal{syscall.SIGKILL}},
		{name: "mid-epoch-checkpoint", sigs: []syscall.Signal{syscall.SIGINT, syscall.SIGKILL}},
	})
}

// wayToStop is a way to stop a run part-way: the signals stopPartWay sends, in turn, and the
// subtests' name for it.
type wayToStop struct {
	name string
	sigs []syscall.Signal
	rank int // the rank the first signal goes to (0: the one that writes)
}

// resumeAcrossWorldSizes is both tests: the uninterrupted run, then per direction and per way to
// stop, a run stopped part-way (stopPartWay) and resumed under the other world size with
// --resume auto.
func resumeAcrossWorldSizes(t *testing.T, ways []wayToStop) {
	m := newMPIRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	dir := t.TempDir()
	single := func(runDir string, more ...string) *exec.Cmd {
		return m.command(ctx, m.bin, trainArgs(runDir, append([]string{"--set", "BatchSize=32", "--devices", "2"}, more...)...)...)
	}
	multi := func(runDir string, more ...string) *exec.Cmd {
		args := append(append(slices.Clone(mpirunArgs), "-np", "2", m.bin), trainArgs(runDir, append([]string{"--set", "BatchSize=16"}, more...)...)...)
		return m.command(ctx, m.mpirun, args...)
	}
	ref := filepath.Join(dir, "ref")
	if out, err := single(ref).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, tail(out))
	}
	want := readRecord(t, ref)
	for _, way := range ways {
		for _, c := range []struct {
			name          string
			first, second func(runDir string, more ...string) *exec.Cmd
			from, to      int // world sizes
		}{{"np2-to-1-process-2-devices", multi, single, 2, 1}, {"1-process-2-devices-to-np2", single, multi, 1, 2}} {
			name := path.Join(way.name, c.name)
			t.Run(name, func(t *testing.T) {
				at := stopPartWay(t, c.first, filepath.Join(dir, name), c.from, way)
				noLeftovers(t, at.runDir)
				out, err := c.second(at.runDir, "--resume", "auto").CombinedOutput()
				if err != nil {
					t.Fatalf("resume: %v\n%s", err, tail(out))
				}
				if note := fmt.Sprintf("resumed from %s: epoch %d, step %d", at.ckpt, at.Epoch, at.Step); !bytes.Contains(out, []byte(note)) {
					t.Errorf("the resume does not say it starts from the newest checkpoint (%q):\n%s", note, tail(out))
				}
				// The global batch stays 32 samples, so the batch the resume starts from keeps its number.
				p := at.Position
				if note := fmt.Sprintf("resume: data position of %d process(es), epoch %d batch %d of 32 samples, is batch %d of 32 samples over %d process(es)",
					c.from, p.Epoch, p.Batch, p.Batch, c.to); !bytes.Contains(out, []byte(note)) {
					t.Errorf("the resume does not say it moved the data position (%q):\n%s", note, tail(out))
				}
				got := readRecord(t, at.runDir)
				sameSteps(t, got, want, append(stepRange(1, at.logged), stepRange(at.Step+1, len(want.steps))...), "stopped and resumed", "uninterrupted")
				compareFinal(t, at.runDir, ref)
				noLeftovers(t, at.runDir)
			})
		}
	}
}

// sameSteps requires got's train lines to be the steps order lists, in that order (a step taken
// twice, or by two ranks, or skipped fails), each loss within 1e-5 of want's line for its step;
// want holds one line per step. a and b name the runs.
func sameSteps(t *testing.T, got, want record, order []int, a, b string) {
	t.Helper()
	if len(want.steps) == 0 || !slices.Equal(want.steps, stepRange(1, len(want.steps))) {
		t.Fatalf("train lines %s are steps %s: want one line per step from 1", b, spans(want.steps))
	}
	if !slices.Equal(got.steps, order) {
		t.Fatalf("train lines %s are steps %s, want %s (one rank writes; each step once, but those a killed run logged after its last checkpoint twice)",
			a, spans(got.steps), spans(order))
	}
	for i, s := range got.steps {
		if math.Abs(got.loss[i]-want.loss[s-1]) > 1e-5 {
			t.Errorf("step %d (train line %d): loss %.8g %s, %.8g %s", s, i+1, got.loss[i], a, want.loss[s-1], b)
		}
	}
}

// stepRange is the steps first..last (none when last < first).
func stepRange(first, last int) []int {
	var s []int
	for i := first; i <= last; i++ {
		s = append(s, i)
	}
	return s
}

// spans writes steps as runs of consecutive numbers, "1-40, 33-312", so a message stays short.
func spans(steps []int) string {
	var parts []string
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(steps[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", steps[i], steps[j]))
		}
		i = j + 1
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// stopped is a run stopped part-way: its run dir, the newest checkpoint it left (the one a
// resume starts from: path and header) and the step of the record's last train line.
type stopped struct {
	runDir, ckpt string
	*checkpoint.Header
	logged int
}

// stopPartWay starts cmd into a fresh run dir under dir (world processes) and sends way's first
// signal to way.rank (0: the one process, or under mpirun the rank that writes the record and the
// checkpoints); each further signal goes to the resumed run's rank 0 (--resume auto, the same
// world size). A signal stops the run:
//   - SIGINT once it has trained: gracefully, checkpointing the step it stops on, part-way
//     through an epoch, in global batches of 32;
//   - SIGKILL once its newest checkpoint is listed and its record has steps past it: the run
//     dies (killedRunEnds bounds how long the other ranks take), its record's last step
//     part-way through the epoch after that checkpoint.
//
// It returns what the last stop left. Stops that land elsewhere (on an epoch's last step, after
// the run ended) are tried again from a fresh run dir, twice at most.
func stopPartWay(t *testing.T, cmd func(runDir string, more ...string) *exec.Cmd, dir string, world int, way wayToStop) stopped {
	sigs := way.sigs
	t.Helper()
	for try := range 3 {
		runDir := filepath.Join(dir, strconv.Itoa(try))
		var at stopped
		landed := true
		for i, sig := range sigs {
			var more []string
			if i > 0 {
				more = []string{"--resume", "auto"}
			}
			prev := at.ckpt
			victim := 0
			if i == 0 {
				victim = way.rank
			}
			if at, landed = stopOnce(t, cmd(runDir, more...), runDir, world, sig, victim); !landed {
				break
			}
			// A resumed run must stop before it checkpoints again: the newest checkpoint, where
			// the test's resume starts, stays the previous stop's.
			if landed = i == 0 || at.ckpt == prev; !landed {
				t.Logf("the resumed run checkpointed (%s) before the stop: again", at.ckpt)
				break
			}
		}
		if landed {
			return at
		}
	}
	t.Fatalf("three tries never stopped the run (%v) part-way through an epoch", sigs)
	return stopped{}
}

// stopOnce starts c, training into runDir, sends sig as stopPartWay says, and returns what the
// stop left and whether it landed part-way through an epoch.
func stopOnce(t *testing.T, c *exec.Cmd, runDir string, world int, sig syscall.Signal, victim int) (stopped, bool) {
	t.Helper()
	out, exited := startTraining(t, c, runDir)
	if sig == syscall.SIGKILL {
		// Also past the lines of a run this one resumes: its processes are up by then.
		waitUntil(t, exited, out, "trained past a checkpoint", func() bool { return pastCheckpoint(runDir) })
	}
	pids := []int{c.Process.Pid}
	if world > 1 {
		pids = nil
		for r := range world {
			pids = append(pids, rankPID(t, c.Process.Pid, r))
		}
	}
	// ESRCH: the run ended first; what it left says so below.
	if err := syscall.Kill(pids[victim], sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Fatal(err)
	}
	var err error
	if sig == syscall.SIGKILL {
		err = killedRunEnds(t, c, exited, out, slices.Delete(slices.Clone(pids), victim, victim+1))
	} else if err = <-exited; err != nil {
		t.Fatalf("after SIGINT: %v (want a graceful stop)\n%s", err, tail(out.Bytes()))
	}
	newest, ok, nerr := checkpoint.Newest(runDir)
	if nerr != nil || !ok {
		t.Fatalf("no checkpoint after the stop (%v):\n%s", nerr, tail(out.Bytes()))
	}
	h, ierr := checkpoint.Info(newest)
	if ierr != nil {
		t.Fatal(ierr)
	}
	at := stopped{runDir: runDir, ckpt: newest, Header: h, logged: lastTrainStep(filepath.Join(runDir, "metrics.jsonl"))}
	p := h.Position
	if !p.Global() || p.GlobalBatch != 32 || (sig == syscall.SIGINT && h.StopReason != "requested") {
		t.Fatalf("the newest checkpoint after %v: stop reason %q, position %+v; want global batches of 32 (and after SIGINT, requested)", sig, h.StopReason, p)
	}
	// The step the epoch after the checkpoint ends on (one batch a step): the rest of a partial
	// epoch, or all of the next one.
	epochEnd, epoch := h.Step+p.EpochBatches-p.Batch, p.Epoch
	if p.Batch == p.EpochBatches {
		epochEnd, epoch = h.Step+p.EpochBatches, p.Epoch+1
	}
	switch {
	case sig == syscall.SIGINT && p.Batch > 0 && p.Batch < p.EpochBatches && at.logged == h.Step:
		t.Logf("stopped at epoch %d, batch %d of %d (step %d)", p.Epoch, p.Batch, p.EpochBatches, h.Step)
		return at, true
	case sig == syscall.SIGKILL && err != nil && h.Step < at.logged && at.logged < epochEnd:
		t.Logf("killed at step %d, part-way through epoch %d; the newest checkpoint is at epoch %d, batch %d of %d (step %d)",
			at.logged, epoch, p.Epoch, p.Batch, p.EpochBatches, h.Step)
		return at, true
	}
	t.Logf("the stop (%v: %v) landed at step %d, the newest checkpoint at epoch %d, batch %d of %d (step %d), not part-way through an epoch: again",
		sig, err, at.logged, p.Epoch, p.Batch, p.EpochBatches, h.Step)
	return at, false
}

// pastCheckpoint reports whether runDir's manifest lists a checkpoint and its record logs steps
// past the newest one: 10 at least, so that several steps are logged twice after the resume
// (an epoch here has 156).
func pastCheckpoint(runDir string) bool {
	path, ok, err := checkpoint.Newest(runDir)
	if err != nil || !ok {
		return false
	}
	h, err := checkpoint.Info(path)
	return err == nil && lastTrainStep(filepath.Join(runDir, "metrics.jsonl")) >= h.Step+10
}

// killedRunEnds waits for c, one of whose processes was just SIGKILLed, to end within 30 s (under
// mpirun: it notices the dead rank and ends the others), never a hang, and then for the other
// ranks' processes (others) to be gone too; it returns c.Wait's error (nil: c ended on its own).
func killedRunEnds(t *testing.T, c *exec.Cmd, exited <-chan error, out *lockedBuffer, others []int) error {
	t.Helper()
	const bound = 30 * time.Second
	start := time.Now()
	var err error
	select {
	case err = <-exited:
		t.Logf("the run ended %v after the kill: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(bound):
		_ = c.Process.Kill()
		t.Fatalf("the run still ran %v after the kill:\n%s", bound, tail(out.Bytes()))
	}
	for _, pid := range others {
		for !gone(pid) {
			if time.Since(start) > bound {
				t.Fatalf("rank process %d still runs %v after the kill, though the launcher has exited", pid, bound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return err
}

// noLeftovers requires runDir to hold no durable write's temporary file or folder, and exactly
// the checkpoint files its manifest lists: none unlisted, none listed and missing.
func noLeftovers(t *testing.T, runDir string) {
	t.Helper()
	entries, err := checkpoint.ReadManifest(runDir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range entries {
		listed[e.File] = true
	}
	files, err := os.ReadDir(runDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		switch name := f.Name(); {
		case checkpoint.IsTemp(name):
			t.Errorf("%s: a temporary file is left: %s", runDir, name)
		case strings.HasSuffix(name, ".safetensors") && !listed[name]:
			t.Errorf("%s: checkpoint %s is not in the manifest", runDir, name)
		}
		delete(listed, f.Name())
	}
	for name := range listed {
		t.Errorf("%s: the manifest lists %s, which is not there", runDir, name)
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

// recordLine is what the tests read of one metrics.jsonl line.
type recordLine struct {
	Type, Context string
	Step          int
	Loss          float64
	StepSeconds   float64 `json:"step_seconds"`
}

func (l recordLine) isTrain() bool { return l.Type == "metrics" && l.Context == "train" }

// UnmarshalJSON reads the keys by their exact names: encoding/json matches struct fields without
// regard to case, so an experiment field Context in the params line (the GPT's, a number) would
// land in Context.
func (l *recordLine) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*l = recordLine{}
	for key, dst := range map[string]any{"type": &l.Type, "context": &l.Context, "step": &l.Step, "loss": &l.Loss, "step_seconds": &l.StepSeconds} {
		if raw, ok := m[key]; ok && (key == "type" || m["type"] != nil && string(m["type"]) == `"metrics"`) {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return nil
}

// readRecord reads a run's metrics.jsonl once the run has ended; a line that does not parse (a
// torn write) fails the test.
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
		var line recordLine
		if err := json.Unmarshal(s.Bytes(), &line); err != nil {
			t.Fatalf("%s: a torn line %q: %v", runDir, s.Text(), err)
		}
		switch {
		case line.Type == "params":
			r.params++
		case line.isTrain():
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
	ra, rb := lastCheckpoint(t, a), lastCheckpoint(t, b)
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
// hang, and rank 0's process ends too; rank 0's record holds no torn line and its run dir no
// temporary file.
func TestMPIStopsWhenARankDies(t *testing.T) {
	m := newMPIRun(t)
	ctx, runDir := m.run(t)
	args := append(append(slices.Clone(mpirunArgs), "-np", "2", m.bin), trainArgs(runDir, "--max-epochs", "200")...)
	c := m.command(ctx, m.mpirun, args...)
	out, exited := startTraining(t, c, runDir)
	rank0, rank1 := rankPID(t, c.Process.Pid, 0), rankPID(t, c.Process.Pid, 1)
	if err := syscall.Kill(rank1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := killedRunEnds(t, c, exited, out, []int{rank0}); err == nil {
		t.Fatalf("mpirun exited 0 after rank 1 was killed:\n%s", tail(out.Bytes()))
	}
	if !regexp.MustCompile(`process rank 1 with PID \d+ .*signal 9`).Match(out.Bytes()) {
		t.Errorf("the error does not name rank 1:\n%s", tail(out.Bytes()))
	}
	readRecord(t, runDir) // fails on a torn line
	noLeftovers(t, runDir)
}

// rankPID finds the child of mpirun whose environment says OMPI_COMM_WORLD_RANK=rank.
func rankPID(t *testing.T, parent, rank int) int {
	t.Helper()
	want := []byte(fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d\x00", rank))
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if f := procStat(pid); len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err == nil && bytes.Contains(env, want) {
			return pid
		}
	}
	t.Fatalf("no child of mpirun (pid %d) is rank %d", parent, rank)
	return 0
}

// procStat is /proc/pid/stat's fields after the command name (state, ppid, ...); nil when the
// process is gone.
func procStat(pid int) []string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// stat: "pid (comm) state ppid ..."; comm may hold spaces, so read after the last ')'.
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
}

// gone reports whether process pid has ended: no /proc entry, or a zombie not yet reaped.
func gone(pid int) bool {
	f := procStat(pid)
	return len(f) == 0 || f[0] == "Z"
}

// BenchmarkMPIStep: per step of `mpirun -np 2 nitro train mnist-mlp --preset tiny` (batch 128
// per rank), the all-reduce's bytes and time (timed alone, by integration/testdata/allreduce,
// on the step's buffer: the gradient, the loss and the stop vote) against the step's wall time,
// and the step of one process on the same per-rank batch. Then the same for BenchmarkFamilies'
// families ($NITRO_BENCH_FAMILIES selects, as there; default all) at their batch per rank, each
// run as 2 ranks and as 1 by mpiFamilyRank, where the all-reduce is also timed inside the step;
// last, the network model those figures feed (docs/multihost.md's table).
func BenchmarkMPIStep(b *testing.B) {
	m := newMPIRun(b)
	ctx, dir := m.run(b)
	tool := buildAllReduceTool(b)
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
		reduce := allReduceAlone(b, m, tool, values+2)
		step2 := median(readRecord(b, multi).seconds[1:]) // the first step compiles
		step1 := median(readRecord(b, single).seconds[1:])
		b.ReportMetric(float64(4*(values+2)), "allreduce-bytes/step")
		b.ReportMetric(reduce*1e6, "allreduce-us/step")
		b.ReportMetric(step2*1e3, "np2-ms/step")
		b.ReportMetric(step1*1e3, "np1-ms/step")
		b.ReportMetric(reduce/step2, "allreduce/step")
		_ = os.RemoveAll(multi)
		_ = os.RemoveAll(single)
		rows := benchMPIFamilies(b, m, tool)
		rows = append([]mpiFamilyFigures{{name: "mnist-mlp tiny (CLI)", values: values + 2, step2: step2, step1: step1,
			reduceIn: reduce, reduceAlone: reduce}}, rows...) // the CLI's step is not instrumented: the alone figure stands in
		printMPIFamilies(rows)
		for _, r := range rows[1:] {
			b.ReportMetric(r.reduceIn/r.step2, r.name+"-allreduce/step")
		}
	}
}
