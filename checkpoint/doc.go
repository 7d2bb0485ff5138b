// Package checkpoint will own the checkpoint record and its storage: the Checkpointer contract,
// TopKCheckpointer, the run manifest, atomic durable writes with retry, and reading a
// checkpoint's info (epoch, step, metrics, build identity) from the safetensors header without
// loading the weights.
//
// Status: contract reserved, not implemented yet. Headers are untrusted bytes: the reader will
// validate them and return errors, never panic, and a failed write will leave no partial file.
package checkpoint
