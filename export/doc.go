// Package export writes a trained Nitro as an export bundle (package exportbundle): one StableHLO
// program per batch size, the weights Forward reads, and a manifest with the inputs, outputs and
// provenance, optionally behind a traced Preprocess. Guide: docs/export.md.
//
// It sits beside cmd, above core; training never links it. Its capture is a piece on nitro's one
// PJRT interposer (pjrthook), which training links for the disk compile cache.
//
// Contract:
//   - Export reads the model only through core's read-only view (Nitro.ViewModel): the named
//     weights, the Device values, Forward's batch contract and a Forward tracer. It never changes
//     the Nitro, never reads a checkpoint, and never touches the compile cache.
//   - The experiment owns its contract: an ExportContract method (Contract: inputs or wire inputs
//     and a Preprocess, outputs, postprocess) fills an ExportSpec that sets none of those fields,
//     so nitro export and a Go Export write the same bundle; a spec that sets one is used as given.
//   - The ExportSpec is checked before anything is traced (what the manifest will hold by the bundle's
//     own rules, exportbundle.CheckSpec), a Preprocess is run once eagerly, and the
//     Host-independence of Forward is checked at every exported batch size; each error names the
//     ExportSpec field, hook or value at fault.
//   - The programs compile through the XLA PJRT plugin (the Nitro's own, else the one
//     backend.FindPlugin finds): without one, Export is an error.
//   - ExportGenerator writes a text generator instead: the decode step the experiment's
//     ExportStep gives (StepExporter), its weights and state told apart by the view's weight
//     names, at batch size 1, with the manifest's generator entry.
//   - The bundle is written atomically, or not at all; the ExportCompiling phase covers the
//     capture and the write. No panic escapes Export.
package export
