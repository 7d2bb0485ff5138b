// Package markers says what each field of an experiment struct is, and so what changing it costs:
// GraphConst bakes into the programs (another value recompiles), Device is a program input
// (SetDevice, no recompile), Host is host code's alone (never traced). Guide: docs/markers.md.
//
// A markers.Device[T] field is a traced input (not in the compile key, settable by SetDevice without recompiling); a field tagged
// `nitro:"graphconst"` bakes into the program and is in the key; anything else is Host: driver
// state that never reaches traced code and never keys. `doc:"..."` and `default:"..."` tags (text
// parsed into the field type), or a `func (E) Default() E` method (not both), complete a field.
// Traits are read by reflection once per type: the declared Go types are the whole description, so
// no macro, per-field type parameter or source-line record is needed. New, FromPreset, Apply and
// ApplyText build and override experiments, validating every key (New and FromPreset remember what
// they built, Built; UnappliedDefaults names the defaulted fields a struct literal left zero);
// GraphConstHash hashes GraphConst
// values by content, seeded by the qualified type name; AssertGraphConstHashable refuses the rest.
//
// A read of a zeroed Host field cannot be trapped in Go (an int has no sentinel value), so the compile
// view (CompileView: Host zeroed, Device bound to graph nodes) comes with a structural check:
// CheckHostIndependent builds from the view and from the real experiment and, if the programs
// differ or the view's build panics, names the Host fields by bisection. Programs are compared by
// Fingerprint of graphs from NewTraceGraph: every node, and every constant by a hash of its bytes
// (GoMLX itself keeps only small constants' values). Left to the caller:
// building graphs, the rest of the cache key, scheduled Device fields. Exported functions return
// errors naming the field and the fix; only Device.Value and Device.Node panic (graph tier).
// Safe for concurrent use on distinct experiments; Apply, ApplyText, SetDevice mutate theirs.
package markers
