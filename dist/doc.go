// Package dist is the multi-process seam: which process of a run this one is (Dist: rank and
// world size), read from NITRO_RANK and NITRO_WORLD_SIZE by FromEnv, and each rank's share of a
// batch source (Shard, ShardData). A single process is Single(): rank 0 of 1, where Shard hands a
// source back unchanged.
// Guide: docs/multihost.md.
//
// The package runs nothing across processes: there is no coordinator, key-value store or
// collective here (docs/multihost.md says what a real multi-host run adds and where). Core takes
// a Dist with core.WithDist, hands it to an experiment's BuildData(d dist.Dist), and lets only
// rank 0 write checkpoints, metrics and exports.
//
// Errors name the field or variable, its value and the valid range. A Dist is a plain value,
// safe to copy and share; a Sharded source is as safe for concurrent use as the source it wraps
// (BatchAt only translates the index).
package dist
