package mpi_test

import (
	"fmt"

	"github.com/nitro-go/nitro/mpi"
)

// Under `mpirun -np 2`, every rank sums its buffer with the others'. Not run here (it needs
// mpirun); TestCollectivesUnderMpirun runs the same calls under mpirun.
func ExampleOpen() {
	comm, err := mpi.Open("") // $NITRO_MPI_LIBRARY, else libmpi.so.40
	if err != nil {
		fmt.Println(err)
		return
	}
	defer comm.Close()
	buf := []float32{float32(comm.Rank()), 1}
	if err := comm.AllReduceSum(buf); err != nil {
		comm.Abort(1) // the other ranks may wait for this one: end them all
	}
	fmt.Println(comm.Rank(), buf) // on 2 ranks: [1 2] on each
}
