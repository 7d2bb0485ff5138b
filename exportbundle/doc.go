// Package exportbundle writes, verifies and runs export bundles, the form a trained model leaves
// nitro in: StableHLO programs and safetensors weights, run with gopjrt alone (nitro run-bundle;
// nitro serve: the Open Inference Protocol's /v2 REST API, binary tensor data included, for one
// bundle or a model repository of several by name, ServeModels, and POST /predict for a single
// bundle). Guide: docs/export.md.
//
// A bundle is one StableHLO program per batch size (program-b<N>.mlir), the weights in
// weights.safetensors, an optional postprocess.txt, and a manifest.json (input/output specs,
// weight names in argument order, batch sizes, provenance, every file's size and SHA-256). A
// program takes the inputs, then the weights, in manifest order.
//
// Capture obtains the programs. GoMLX v0.25 (v0.26 too) builds StableHLO text and hands it straight
// to PJRT's Client_Compile, with no accessor, so Capture interposes: nitro's one PJRT interposer
// (module pjrthook: cgo, no XLA code) copies the real plugin's PJRT_Api table, wraps
// PJRT_Client_Compile, and registers the copy through gopjrt's public RegisterPreloadedPlugin; its
// capture piece records each program's format and bytes, and a fresh GoMLX stablehlo backend on
// it compiles the caller's graphs.
// The bundle holds exactly what XLA compiled. Rejected: a separate shim .so (a compiler at run time;
// a Go c-shared library cannot be loaded into a Go process), moving the GoMLX/gopjrt pins, reading
// unexported fields through unsafe, parsing GoMLX's V(2) log, copying GoMLX's builder.
//
// Left to the caller: which graphs to build (inputs before weights), the specs, provenance and its
// precedence, phases. CheckSpec applies the manifest's rules to what a caller knows before it
// traces (name, inputs, batch sizes, client specs, provenance keys), so an exporter need not
// restate them. RunJSON runs one /predict request in process, by the code Handler uses.
//
// A text generator's bundle holds its decode step (token, position and state in; logits and
// state out) and a manifest generator entry (GeneratorSpec) naming them: Runner.Stepper runs it
// as a generate.Stepper with the state kept on the device, and the server answers its infer
// with a prompt's continuation (input "prompt", parameters max_tokens, temperature, top_k, seed;
// outputs "text" and "tokens").
//
// Errors: Read and Open return *FormatError naming the file (wrapping ErrNewerFormat for a newer
// format); CheckSpec returns *SpecError naming the manifest field; Run returns *InputError naming
// the input; RunJSON returns *RequestError with the status and message Handler answers with. The
// /v2 infer path shares /predict's bounds and streaming decoder; its refusals name the protocol's
// field (inputs[i].shape, Inference-Header-Content-Length, ...).
// Captures are serialized in a process (at most four real plugins per process); a Runner is safe for
// concurrent use; a Bundle is plain data, not synchronized.
package exportbundle
