package sweep

import "context"

// Kind is a parameter's distribution.
type Kind string

// The distributions a parameter may take.
const (
	Uniform    Kind = "uniform"    // a float in [Low, High]
	LogUniform Kind = "loguniform" // a float in [Low, High], uniform in its logarithm (Low > 0)
	Int        Kind = "int"        // an integer in [Low, High]
	Choice     Kind = "choice"     // one of Choices
)

// Param is one searched field.
type Param struct {
	Name    string   // the experiment's field, as --set names it
	Kind    Kind     // its distribution
	Low     float64  // Uniform, LogUniform, Int: the range's ends, both included
	High    float64  //
	Choices []string // Choice: the values, as text the field parses
}

// Space is the searched fields, in the order given.
type Space []Param

// State is a trial's state, as Optuna names them.
type State string

// Trial states. Waiting is not used: a trial is recorded when it starts.
const (
	Running  State = "RUNNING"
	Complete State = "COMPLETE"
	Pruned   State = "PRUNED"
	Fail     State = "FAIL"
)

// Trial is one trial as the record holds it.
type Trial struct {
	Number int
	// Params are the values in Optuna's internal form: the float itself, an Int's integer as a
	// float, a Choice's index into its Choices.
	Params       map[string]float64
	State        State
	Value        float64         // the objective's value; meaningful when HasValue
	HasValue     bool            // Complete trials have one; a Pruned trial has its last reported value
	Intermediate map[int]float64 // step → reported value
	Attrs        map[string]any  // the trial's user attributes (run_dir, seed, compiles, error)
}

// Study is a sweep's whole record, rebuilt from its journal.
type Study struct {
	Name     string
	Maximize bool           // the direction: false minimizes Metric
	Metric   string         // the validation metric the trials are judged by
	Space    Space          // the search space the sweep was created with
	Attrs    map[string]any // the study's user attributes (sampler, seed, trials planned, compiles)
	Trials   []Trial        // by number
}

// Sampler proposes trial number's values given the trials recorded so far (any state). It must be
// a pure function of its arguments and its own seed, so a resumed sweep proposes the same values.
type Sampler interface {
	Sample(space Space, history []Trial, number int) (map[string]float64, error)
}

// Pruner says whether a trial that reported value at step stops there, given the other trials'
// intermediate values (history excludes nothing: the trial itself is in it, with its earlier
// reports). maximize is the study's direction.
type Pruner interface {
	Prune(history []Trial, number, step int, value float64, maximize bool) bool
}

// TrialRun is one trial as an Objective runs it.
type TrialRun struct {
	Number int
	Params map[string]float64 // Optuna's internal form (see Trial.Params)
	Sets   []string           // the same values as "Name=value", in the space's order, for --set
	Dir    string             // the trial's own run dir, under the sweep dir
	Seed   int                // the trial's seed (the sweep's seed + Number)
	Resume bool               // the trial was interrupted: continue from Dir's newest checkpoint

	// report records an intermediate value and asks the pruner (set by Run).
	report func(step int, value float64) (prune bool, err error)
}

// Report records the trial's validation metric at step (an epoch or an optimizer step: one
// kind per sweep) durably, and says whether the trial should stop there (pruned).
func (t *TrialRun) Report(step int, value float64) (prune bool, err error) {
	if t.report == nil {
		return false, nil
	}
	return t.report(step, value)
}

// SetReport makes Report call f: for an Objective that trains the trial elsewhere (a worker
// process) and sets up its own TrialRun there to relay the reports back.
func (t *TrialRun) SetReport(f func(step int, value float64) (prune bool, err error)) { t.report = f }

// Outcome is how a trial ended. Its value is not here: a trial's value is the last value it
// reported, which the record already holds, so a trial resumed after its last validation (killed
// between that report and its end) has the same value as one that was never interrupted.
type Outcome struct {
	Pruned bool           // the trial stopped because Report said so
	Attrs  map[string]any // recorded on the trial (compiles, steps, wall time)
}

// Objective runs one trial to its end: trains it, calling t.Report at each validation and
// stopping when it says prune. An error fails the trial (recorded with the error's text), and the
// sweep goes on unless ctx is done, in which case the trial stays RUNNING in the record and a
// resumed sweep hands it back with Resume set.
type Objective interface {
	Run(ctx context.Context, t *TrialRun) (Outcome, error)
}
