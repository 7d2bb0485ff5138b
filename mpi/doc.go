// Package mpi is the collective of a multi-process run over Open MPI, for processes started by
// mpirun (or by the MPI Operator, or srun with Open MPI's PMIx): Open loads libmpi at run time
// with dlopen and initializes it, and a Comm sums float32 and float64 buffers in place over
// MPI_COMM_WORLD (MPI_Allreduce with MPI_IN_PLACE) and broadcasts bytes (MPI_Bcast): what
// core.Collective and engine.AllReducer ask for.
//
// Why at run time: a plain `go build` of every module, and `make run`, must need no MPI, and
// MPI's headers differ between implementations. The price is that this package binds one ABI:
// Open MPI's, whose handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are the addresses of the
// exported objects ompi_mpi_comm_world, ompi_mpi_float, ompi_mpi_op_sum, .... Open refuses
// another implementation (MPICH's integer handles would be read as pointers) by the name its
// MPI_Get_library_version reports. Only cmd and integration import this package (depcheck): core's
// training path links no cgo of ours but pjrthook's interposer, and nothing of MPI.
//
// Errors come back from MPI (MPI_ERRORS_RETURN on MPI_COMM_WORLD) as Go errors with MPI's own
// text. One Comm per process; its methods are for one goroutine at a time (MPI_THREAD_SERIALIZED).
package mpi
