// Package mesh runs nitro's programs data-parallel over a 1-D mesh of local devices on XLA's own
// partitioner (GoMLX AutoSharding): the batch inputs are split on their leading axis, one shard
// per device, and every other input (parameters, layer and optimizer state, hyperparameters) is
// replicated; every output is replicated, so a device-0 copy is the value and the partitioner
// inserts the all-reduce of the gradients and the all-gather of per-row outputs.
// Guide: docs/devices.md.
//
// Contract: a Mesh keeps, beside each replicated value it saw (an input or an array output), that
// value's copies on devices 1..n-1, so a value passed again costs no transfer; core keeps holding
// the device-0 tensor as the value, which is why a checkpoint or an export reads one copy. A copy
// whose value was donated, finalized or dropped is freed at the next call. Counts are per device:
// ReplicaUploads (a replicated value placed on a device) and ShardUploads (batch shards).
//
// Errors: a batch whose leading axis does not divide by the device count, a mesh larger than the
// backend's devices, or a failed transfer, each naming the numbers. Panics from GoMLX are turned
// into errors. A Mesh is not safe for concurrent use (a Nitro runs one program at a time).
package mesh
