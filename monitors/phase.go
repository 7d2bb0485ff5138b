package monitors

import "fmt"

// Phase is the root of the run-phase tree. Every value a monitor receives is one of the leaf
// types below; test a category with IsCompiling / IsStepping / IsTerminal (or a type assertion
// to Compiling / Stepping / Terminal) rather than listing leaves, so that adding a leaf stays
// non-breaking.
type Phase interface {
	fmt.Stringer
	// leaf names the leaf type; two phases with the same leaf are the same phase.
	leaf() string
}

// Compiling is the supertype of the compile phases, which are slow by design.
type Compiling interface {
	Phase
	// Program names what is being compiled ("gradient", "optimizer", "eval", "export").
	Program() string
	compiling()
}

// Stepping is the supertype of the two per-batch phases; a run alternates between them.
type Stepping interface {
	Phase
	stepping()
}

// Terminal is the supertype of the two end states.
type Terminal interface {
	Phase
	terminal()
}

// Starting: setup is running, before the first compile. A fresh Tracker reports it.
type Starting struct{}

// GradientCompiling: tracing and compiling the gradient program.
type GradientCompiling struct{}

// OptimizerCompiling: tracing and compiling the optimizer program.
type OptimizerCompiling struct{}

// EvalCompiling: tracing and compiling the eval-mode forward / metrics programs.
type EvalCompiling struct{}

// ExportCompiling: tracing and compiling the export program (once per export call).
type ExportCompiling struct{}

// TrainStepping: running optimizer steps.
type TrainStepping struct{}

// EvalStepping: running the validation, testing or inference loop.
type EvalStepping struct{}

// Checkpointing: writing a checkpoint. It is neither Stepping (no batch completes, so the
// progress counter stands still for the whole write) nor Compiling (nothing is compiled), and a
// write to a slow or remote disk can take far longer than a step: a watchdog treats it as a
// long phase, as it does a compile. It interrupts the phase it was entered from, which is
// restored when the write ends.
type Checkpointing struct{}

// Done: the run finished successfully.
type Done struct{}

// Failed: the run raised Err.
type Failed struct{ Err error }

// Repl: the caller has control and no framework work is in flight in this process. It is
// published but never recorded (see Tracker.Publish).
type Repl struct{}

func (Starting) leaf() string           { return "Starting" }
func (GradientCompiling) leaf() string  { return "GradientCompiling" }
func (OptimizerCompiling) leaf() string { return "OptimizerCompiling" }
func (EvalCompiling) leaf() string      { return "EvalCompiling" }
func (ExportCompiling) leaf() string    { return "ExportCompiling" }
func (TrainStepping) leaf() string      { return "TrainStepping" }
func (EvalStepping) leaf() string       { return "EvalStepping" }
func (Checkpointing) leaf() string      { return "Checkpointing" }
func (Done) leaf() string               { return "Done" }
func (Failed) leaf() string             { return "Failed" }
func (Repl) leaf() string               { return "Repl" }

func (p Starting) String() string           { return p.leaf() }
func (p GradientCompiling) String() string  { return p.leaf() }
func (p OptimizerCompiling) String() string { return p.leaf() }
func (p EvalCompiling) String() string      { return p.leaf() }
func (p ExportCompiling) String() string    { return p.leaf() }
func (p TrainStepping) String() string      { return p.leaf() }
func (p EvalStepping) String() string       { return p.leaf() }
func (p Checkpointing) String() string      { return p.leaf() }
func (p Done) String() string               { return p.leaf() }
func (p Repl) String() string               { return p.leaf() }

// String renders "Failed" or "Failed: <err>".
func (p Failed) String() string {
	if p.Err == nil {
		return "Failed"
	}
	return "Failed: " + p.Err.Error()
}

// Unwrap returns the run's error.
func (p Failed) Unwrap() error { return p.Err }

// Program implements Compiling.
func (GradientCompiling) Program() string { return "gradient" }

// Program implements Compiling.
func (OptimizerCompiling) Program() string { return "optimizer" }

// Program implements Compiling.
func (EvalCompiling) Program() string { return "eval" }

// Program implements Compiling.
func (ExportCompiling) Program() string { return "export" }

func (GradientCompiling) compiling()  {}
func (OptimizerCompiling) compiling() {}
func (EvalCompiling) compiling()      {}
func (ExportCompiling) compiling()    {}
func (TrainStepping) stepping()       {}
func (EvalStepping) stepping()        {}
func (Done) terminal()                {}
func (Failed) terminal()              {}

// IsCompiling reports whether p is a compile phase.
func IsCompiling(p Phase) bool { _, ok := p.(Compiling); return ok }

// IsStepping reports whether p is a per-batch phase.
func IsStepping(p Phase) bool { _, ok := p.(Stepping); return ok }

// IsTerminal reports whether p is an end state (Done or Failed).
func IsTerminal(p Phase) bool { _, ok := p.(Terminal); return ok }

// IsCheckpointing reports whether p is Checkpointing.
func IsCheckpointing(p Phase) bool { _, ok := p.(Checkpointing); return ok }

// IsRepl reports whether p is Repl.
func IsRepl(p Phase) bool { _, ok := p.(Repl); return ok }

// SamePhase reports whether a and b are the same leaf. Failed values are the same phase whatever
// their errors; nil equals only nil.
func SamePhase(a, b Phase) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.leaf() == b.leaf()
}

// Progress is where a run is. Step and Epoch are meaningful only when Started is true: both are
// absent until the first epoch begins (a standalone validate, or a transition before the loop).
type Progress struct {
	Epoch   int
	Step    int
	Started bool
}

// String renders "epoch E step S" or "before first epoch".
func (p Progress) String() string {
	if !p.Started {
		return "before first epoch"
	}
	return fmt.Sprintf("epoch %d step %d", p.Epoch, p.Step)
}
