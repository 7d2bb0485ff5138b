//go:build unix

package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/mpi"
)

// mpiFamilyEnv names the family a copy of this test binary trains as one rank under mpirun
// (BenchmarkMPIStep starts it so); unset, the binary runs its tests as usual.
const mpiFamilyEnv = "NITRO_MPI_BENCH_FAMILY"

func TestMain(m *testing.M) {
	if name := os.Getenv(mpiFamilyEnv); name != "" {
		os.Exit(mpiFamilyRank(name))
	}
	os.Exit(m.Run())
}

// timedComm is package mpi's Comm with each float32 all-reduce timed: the step's buffer is the
// largest one summed (the epoch's stop requests and validation ride in smaller or float64 ones),
// so the calls of the largest length are the steps'.
type timedComm struct {
	*mpi.Comm
	n     int       // the largest length summed
	times []float64 // seconds per call of that length
}

var _ core.Collective = (*timedComm)(nil)

func (c *timedComm) AllReduceSum(buf []float32) error {
	start := time.Now()
	err := c.Comm.AllReduceSum(buf)
	d := time.Since(start).Seconds()
	switch {
	case len(buf) > c.n:
		c.n, c.times = len(buf), []float64{d}
	case len(buf) == c.n:
		c.times = append(c.times, d)
	}
	return err
}

// mpiFamilyEpochs is how many epochs a rank times after one untimed (which compiles).
const mpiFamilyEpochs = 3

// mpiFamilyRank trains family name as this process's rank of an mpirun, each rank on its shard
// of W x f.steps x f.batch rows (f.batch per rank and step), one untimed epoch then
// mpiFamilyEpochs timed; rank 0 prints one "mpifamily" line: the summed buffer's length, the
// median step (the gaps between consecutive train lines within an epoch) and the median
// all-reduce of the step's buffer, as it ran inside the step. It returns the exit code.
func mpiFamilyRank(name string) int {
	fail := func(comm *mpi.Comm, err error) int {
		fmt.Fprintf(os.Stderr, "%s=%s: %v\n", mpiFamilyEnv, name, err)
		if comm != nil {
			comm.Abort(1)
		}
		return 1
	}
	fams, err := selectFamilies(name)
	if err != nil {
		return fail(nil, err)
	}
	f := fams[0]
	comm, err := mpi.Open("")
	if err != nil {
		return fail(nil, err)
	}
	d, err := dist.FromEnv(nil)
	if err != nil {
		return fail(comm, err)
	}
	tc := &timedComm{Comm: comm}
	opts := []core.Option{core.WithDist(d)}
	if comm.Size() > 1 {
		opts = append(opts, core.WithCollective(tc))
	}
	data := newFamBatches(f, 7, comm.Size()*f.steps*f.batch)
	nt, clock, err := newFamNitro(f, data, f.batch, compilecache.New(), opts...)
	if err != nil {
		return fail(comm, err)
	}
	if err := epoch(nt); err != nil {
		return fail(comm, err)
	}
	tc.times = nil
	var steps []float64
	for range mpiFamilyEpochs {
		clock.ends = clock.ends[:0]
		if err := epoch(nt); err != nil {
			return fail(comm, err)
		}
		for i := 1; i < len(clock.ends); i++ {
			steps = append(steps, clock.ends[i].Sub(clock.ends[i-1]).Seconds())
		}
	}
	if comm.Rank() == 0 {
		if len(steps) == 0 {
			return fail(comm, fmt.Errorf("rank 0 logged no train line"))
		}
		reduce := 0.0
		if len(tc.times) > 0 {
			reduce = median(tc.times)
		}
		fmt.Printf("mpifamily family=%s ranks=%d values=%d calls=%d step_s=%g reduce_s=%g\n",
			f.name, comm.Size(), tc.n, len(tc.times), median(steps), reduce)
	}
	if err := comm.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// mpiFamilyFigures is one family's figures at 2 processes and at 1 (the same per-rank batch).
type mpiFamilyFigures struct {
	name                   string
	values                 int     // float32 values summed per step: the gradients, the loss, the stop vote
	step2, reduceIn, step1 float64 // seconds: the 2-process step, its all-reduce (inside it), one process's step
	reduceAlone            float64 // seconds: one all-reduce of the same buffer, timed alone
}

// benchMPIFamilies runs each family of $NITRO_BENCH_FAMILIES (default: all) as 2 ranks and as 1
// under mpirun (this test binary, as mpiFamilyRank), and times its step's buffer alone with the
// allreduce tool.
func benchMPIFamilies(b *testing.B, m mpiRun, tool string) []mpiFamilyFigures {
	fams, err := selectFamilies(os.Getenv(famSelectEnv))
	if err != nil {
		b.Fatal(err)
	}
	ctx, _ := m.run(b)
	line := regexp.MustCompile(`mpifamily family=(\S+) ranks=(\d+) values=(\d+) calls=(\d+) step_s=(\S+) reduce_s=(\S+)`)
	rank := func(f *family, np int) []string {
		c := m.command(ctx, m.mpirun, append(slices.Clone(mpirunArgs), "-x", mpiFamilyEnv, "-np", strconv.Itoa(np), os.Args[0])...)
		c.Env = append(slices.Clone(m.env), mpiFamilyEnv+"="+f.name+"@"+strconv.Itoa(f.batch))
		out, err := c.CombinedOutput()
		g := line.FindStringSubmatch(string(out))
		if err != nil || g == nil {
			b.Fatalf("%s on %d ranks: %v\n%s", f.name, np, err, tail(out))
		}
		return g
	}
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	var rows []mpiFamilyFigures
	for _, f := range fams {
		two, one := rank(f, 2), rank(f, 1)
		values, _ := strconv.Atoi(two[3])
		if calls, _ := strconv.Atoi(two[4]); calls < mpiFamilyEpochs*(f.steps-1) {
			b.Fatalf("%s: %d all-reduce calls of the step's %d values over %d timed epochs of %d steps: not one per step", f.name, calls, values, mpiFamilyEpochs, f.steps)
		}
		rows = append(rows, mpiFamilyFigures{name: f.name + "@" + strconv.Itoa(f.batch), values: values,
			step2: num(two[5]), reduceIn: num(two[6]), step1: num(one[5]), reduceAlone: allReduceAlone(b, m, tool, values)})
	}
	return rows
}

// allReduceAlone is the median of one mpi.Comm.AllReduceSum of values float32 over 2 ranks,
// timed by integration/testdata/allreduce.
func allReduceAlone(b *testing.B, m mpiRun, tool string, values int) float64 {
	ctx, _ := m.run(b)
	out, err := m.command(ctx, m.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", tool, "-n", strconv.Itoa(values)).CombinedOutput()
	if err != nil {
		b.Fatalf("allreduce: %v\n%s", err, out)
	}
	g := regexp.MustCompile(`bytes=(\d+) median_s=(\S+)`).FindSubmatch(out)
	if g == nil {
		b.Fatalf("allreduce printed %q", out)
	}
	v, _ := strconv.ParseFloat(string(g[2]), 64)
	return v
}

// buildAllReduceTool builds integration/testdata/allreduce into a temporary folder.
func buildAllReduceTool(b *testing.B) string {
	tool := b.TempDir() + "/allreduce"
	build := exec.Command("go", "build", "-o", tool, "./integration/testdata/allreduce")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./integration/testdata/allreduce: %v\n%s", err, out)
	}
	return tool
}

// gpt2SmallParams is GPT-2 small's parameter count (124M, the token embedding shared with the
// output layer): the network table's model with no measured step.
const gpt2SmallParams = 124_439_808

// printMPIFamilies prints the families' figures and the network model they feed: steps per
// second at N hosts = 1 / (compute + ring), ring being 2(N-1)/N x the buffer's bytes / the link's
// bandwidth and compute the measured one-process step on the same per-rank batch: a host runs one
// rank on cores of its own, as that process did, while the 2-process run shares this machine's
// cores between both ranks (and other work), which its in-step all-reduce shows as time spent
// waiting for the other rank.
func printMPIFamilies(rows []mpiFamilyFigures) {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nall-reduce per step, 2 processes on this machine (load average %s):\n", firstField3(string(load)))
	fmt.Printf("  %-16s %12s %14s %14s %12s %12s %14s %16s\n", "family", "bytes/step", "reduce in step", "reduce alone", "np2 ms/step", "np1 ms/step", "reduce/step", "alone/step")
	for _, r := range rows {
		fmt.Printf("  %-16s %12d %11.3f ms %11.3f ms %12.2f %12.2f %14.3f %16.3f\n", r.name, 4*r.values, r.reduceIn*1e3, r.reduceAlone*1e3,
			r.step2*1e3, r.step1*1e3, r.reduceIn/r.step2, r.reduceAlone/r.step2)
	}
	hosts, links := []int{2, 8, 64}, []float64{10, 100}
	ring := func(bytes float64, n int, gbps float64) float64 {
		return 2 * float64(n-1) / float64(n) * bytes * 8 / (gbps * 1e9)
	}
	fmt.Printf("\nnetwork model, steps/s = 1 / (compute + 2(N-1)/N x bytes / link); compute = np1 step (measured above):\n")
	fmt.Printf("| model | gradient bytes | compute ms | N=2, 10 Gb/s | N=2, 100 Gb/s | N=8, 10 Gb/s | N=8, 100 Gb/s | N=64, 10 Gb/s | N=64, 100 Gb/s |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	model := func(name string, bytes, compute float64, measured bool) {
		c := "not measured"
		if measured {
			c = fmt.Sprintf("%.2f", compute*1e3)
		}
		fmt.Printf("| %s | %.0f | %s |", name, bytes, c)
		for _, n := range hosts {
			for _, l := range links {
				fmt.Printf(" %.1f |", 1/(compute+ring(bytes, n, l)))
			}
		}
		fmt.Println()
	}
	for _, r := range rows {
		model(r.name, float64(4*r.values), r.step1, true)
	}
	model("GPT-2 small (all-reduce only)", 4*gpt2SmallParams, 0, false)
}

func firstField3(loadavg string) string {
	f := regexp.MustCompile(`\s+`).Split(loadavg, 4)
	if len(f) < 3 {
		return loadavg
	}
	return f[0] + " " + f[1] + " " + f[2]
}
