// Package exportbundle will own the export bundle: ExportSpec, the writer (one StableHLO program
// per batch size, safetensors weights, a manifest with provenance) and a runner that executes a
// bundle on PJRT through gopjrt alone, with no GoMLX needed to serve.
//
// Status: contract reserved, not implemented yet. Bundles are untrusted input to the runner: it
// will validate the manifest against the files before loading anything.
package exportbundle
