// Package collective is an in-memory collective for tests of multi-process training: Local(n)
// gives n ranks of one run, each driven by its own goroutine, with the operations a nitro run
// needs across its processes (the consumer's interfaces: engine.AllReducer, core.Collective):
// AllReduceSum over float32 and float64 buffers in place, and Broadcast of one rank's bytes.
// Package mpi is the same over Open MPI, for real processes under mpirun.
//
// The contract every implementation keeps: every rank calls the same operations in the same
// order with buffers of the same length; a call returns when every rank has made it, with every
// rank's buffer holding the same result. Sums are taken in rank order, so every rank gets the
// same bits. A length that differs between ranks is an error on every rank, never a partial sum;
// a rank that Leaves makes every pending and later call on the others fail, naming it, so a dead
// rank stops the run instead of hanging it.
//
// A Rank is for one goroutine at a time; distinct Ranks of a group are safe to use concurrently.
package collective
