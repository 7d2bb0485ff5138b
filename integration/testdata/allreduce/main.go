// Command allreduce times mpi.Comm.AllReduceSum on one buffer size, for BenchmarkMPIStep: run it
// under mpirun; rank 0 prints the median time of one call over -reps calls, after -warm untimed.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nitro-go/nitro/mpi"
)

func main() {
	n := flag.Int("n", 50890, "float32 elements per call")
	reps := flag.Int("reps", 200, "timed calls")
	warm := flag.Int("warm", 20, "untimed calls first")
	flag.Parse()
	comm, err := mpi.Open("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]float32, *n)
	t := make([]float64, *reps)
	for i := -*warm; i < *reps; i++ {
		start := time.Now()
		if err := comm.AllReduceSum(buf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			comm.Abort(1)
		}
		if i >= 0 {
			t[i] = time.Since(start).Seconds()
		}
	}
	slices.Sort(t)
	if comm.Rank() == 0 {
		fmt.Printf("allreduce n=%d bytes=%d median_s=%g\n", *n, 4**n, t[len(t)/2])
	}
	if err := comm.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
