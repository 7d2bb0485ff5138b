// Package dist is the multi-process seam: which process of a run this one is (Dist: rank and
// world size), read by FromEnv from the first launcher whose variables are set (NITRO_*, JAX_*,
// Open MPI, Slurm, torchrun, an indexed Job; Dist.Source names it), and each rank's share of a
// batch source (Shard, ShardData). A single process is Single(): rank 0 of 1, where Shard hands a
// source back unchanged.
// Guide: docs/multihost.md.
//
// The package moves no bytes between processes: the collective that sums gradients and
// validation accumulators is the consumer's interface (engine.AllReducer, core.Collective),
// implemented by the collective module (in-memory) and the mpi module (Open MPI). Core takes
// a Dist with core.WithDist, hands it to an experiment's BuildData(d dist.Dist), and lets only
// rank 0 write checkpoints, metrics and exports.
//
// Errors name the field or variable, its value and the valid range. A Dist is a plain value,
// safe to copy and share; a Sharded source is as safe for concurrent use as the source it wraps
// (BatchAt only translates the index).
package dist
