package mpi

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// envChild marks a test binary that mpirun started as one rank: TestMain runs child instead of
// the tests.
const envChild = "NITRO_MPI_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		if err := child(); err != nil {
			fmt.Println("child error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is one rank: it sums rank-dependent buffers and broadcasts rank 1's bytes, and prints
// what it got.
func child() error {
	c, err := Open("")
	if err != nil {
		return err
	}
	f32 := []float32{float32(c.Rank()), 1, 0.5}
	f64 := make([]float64, 3)
	for i := range f64 {
		f64[i] = float64(c.Rank()*10 + i)
	}
	msg := []byte(fmt.Sprintf("from rank %d", c.Rank()))
	for _, err := range []error{c.AllReduceSum(f32), c.AllReduceSum64(f64), c.Broadcast(msg, 1)} {
		if err != nil {
			return err
		}
	}
	fmt.Printf("rank %d of %d: %v %v %q (%s)\n", c.Rank(), c.Size(), f32, f64, msg, c.Version())
	return c.Close()
}

// mpirun is the launcher's path, or the test stops (prereq.OpenMPI).
func mpirun(t *testing.T) string {
	p, err := exec.LookPath("mpirun")
	if err != nil {
		prereq.OpenMPI.Absent(t, err)
	}
	return p
}

// Three real processes under mpirun sum and broadcast over Open MPI loaded at run time.
func TestCollectivesUnderMpirun(t *testing.T) {
	cmd := exec.Command(mpirun(t), "--allow-run-as-root", "--oversubscribe", "-np", "3", os.Args[0])
	cmd.Env = append(os.Environ(), envChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for r := range 3 {
		want := fmt.Sprintf(`rank %d of 3: [3 3 1.5] [30 33 36] "from rank 1" (Open MPI`, r)
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A library that is not MPI, or none, is refused naming it and the fix.
func TestOpenRefusesWhatIsNotOpenMPI(t *testing.T) {
	_, err := open("libc.so.6")
	if err == nil || !strings.Contains(err.Error(), "libc.so.6 has no MPI_Get_library_version") {
		t.Errorf("libc: %v", err)
	}
	_, err = open("/nonexistent/libmpi.so")
	if err == nil || !strings.Contains(err.Error(), "cannot load /nonexistent/libmpi.so") || !strings.Contains(err.Error(), EnvLibrary) {
		t.Errorf("absent: %v", err)
	}
}
