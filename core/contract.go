package core

import (
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// This file is the experiment contract: every hook and knob an experiment may define. New looks
// for each once, at setup, on the experiment's pointer type, and for nothing else; the table in
// doc.go says when each hook is called, its default, and what refuses it.
//
// Declared here: the traced hooks (reflected, below), ModelBuilder, DataBuilder, Deriver,
// MetricsFinalizer, ParamGrouper and the knobs (config). Declared beside the code that calls
// them, and listed in doc.go's table with their file:
//
//	hyper.go       RuleChooser, ChainBuilder, GroupLearningRater, GroupLambdaer,
//	               DecayAnchorer, NoDecayer, Scheduler (the optimizer's levels and accessors)
//	checkpoint.go  CheckpointerChooser, CheckpointNamer
//	earlystop.go   EarlyStopChooser (the policy it returns is an earlystop.Policy)
//	model.go       ExportProvenancer (the export module calls it, through ModelView)
//	manual.go      ManualChooser, OptimizerSetter (manual mode; TrainStep's hooks.ManualStep
//	               verbs Backward and StepOptimizer are package hooks' contract)
//	dist.go        DistDataBuilder (BuildData(d dist.Dist): the DataBuilder form that takes the
//	               run's rank and world size)
//
// What a split must offer (Source, EpochSource, PartialDropper) is package prefetch's contract;
// what a field's marker means (GraphConst, Host, Device) is package markers'.

// Outputs is what Forward returns: named graph nodes, each with the batch on its leading axis.
// The framework hands it to Loss, Metrics and TrainMetrics exactly as Forward returned it.
type Outputs map[string]*graph.Node

// The traced hooks take a batch parameter whose type varies per experiment, so they cannot be Go
// interfaces (a method cannot take a type parameter): they are found and checked by reflection,
// once, at setup.
//
//	Forward(ctx *context.Context, in B) Outputs                 required
//	Loss(out Outputs, in B) *graph.Node                           required
//	Metrics(out Outputs, in B) map[string]hooks.Metric           optional (default: val_loss)
//	TrainMetrics(out Outputs, in B) map[string]*graph.Node       optional
//	TrainStep(s hooks.ManualStep, in B) hooks.StepResult         optional (manual mode; manual.go)
//
// B is a struct whose exported *graph.Node fields name batch fields by tag (`batch:"img"`, or
// `batch:"img,optional"`; an untagged field uses its Go name), or map[string]*graph.Node meaning
// "the whole batch, nothing checked". Each hook receives only the fields it declares.
var tracedHooks = map[string]tracedHook{
	"Forward":      {true, typeCtx, typeOutputs, "func (e *E) Forward(ctx *context.Context, in B) core.Outputs"},
	"Loss":         {true, typeOutputs, typeNode, "func (e *E) Loss(out core.Outputs, in B) *graph.Node"},
	"Metrics":      {false, typeOutputs, typeMetrics, "func (e *E) Metrics(out core.Outputs, in B) map[string]hooks.Metric"},
	"TrainMetrics": {false, typeOutputs, typeNodeMap, "func (e *E) TrainMetrics(out core.Outputs, in B) map[string]*graph.Node"},
	"TrainStep":    {false, typeManualStep, typeStepResult, "func (e *E) TrainStep(s hooks.ManualStep, in B) hooks.StepResult"},
}

// tracedHook is one traced hook's declaration: whether New requires it, its first parameter and
// its result (the batch parameter is B), and its signature as errors print it.
type tracedHook struct {
	required      bool
	first, result reflect.Type
	signature     string
}

var (
	typeNode    = reflect.TypeOf((*graph.Node)(nil))
	typeCtx     = reflect.TypeOf((*context.Context)(nil))
	typeOutputs = reflect.TypeOf(Outputs(nil))
	typeMetrics = reflect.TypeOf(map[string]hooks.Metric(nil))
	typeNodeMap = reflect.TypeOf(map[string]*graph.Node(nil)) // TrainMetrics' result; B of the whole batch

	typeManualStep = reflect.TypeOf((*hooks.ManualStep)(nil)).Elem()
	typeStepResult = reflect.TypeOf(hooks.StepResult{})
)

// ModelBuilder is the required BuildModel hook: configure the context (initializers, scopes) and
// optionally create variables. Variables Forward creates on its first trace are created during
// setup's shape trace, so every parameter exists before the first program is compiled.
type ModelBuilder interface {
	BuildModel(ctx *context.Context) error
}

// DataBuilder is the BuildData hook, required unless WithData or WithInputSpecs is given. It runs
// once, at setup, against the real experiment. Its other form, DistDataBuilder (dist.go), takes
// the run's Dist; an experiment defines one of the two.
type DataBuilder interface {
	BuildData() (prefetch.Data, error)
}

// Deriver merges host values computed from the data into the experiment, after BuildData and
// before device placement (e.g. class weights from label frequencies).
type Deriver interface {
	Derive(d prefetch.Data) (map[string]any, error)
}

// HeadlineMetrics names the metrics the console's epoch line shows beside the train loss, in
// order and as the record names them ("val_accuracy", "train_accuracy"). Without it the line shows
// the checkpoint's ranking metric and up to three more metrics that are not in a numbered family
// (accuracy_0 ... accuracy_9). Every metric stays in the record, the board and evaluate --all; a
// name an epoch does not report stops Train, naming it.
type HeadlineMetrics interface {
	Headline() []string
}

// MetricsFinalizer post-processes a split's accumulated metrics on the host, once per split:
// acc.Scalars holds the divided means and the totals, acc.Arrays each array summed with no
// count (a confusion matrix), acc.Collected each HostMetrics collection; the result is the
// split's metrics. FinalizedMetricNames declares the names FinalizeMetrics returns, so that New
// checks the checkpoint and early-stopping metrics against them before the first epoch; a result
// with other names is an error.
type MetricsFinalizer interface {
	FinalizeMetrics(acc metrics.Result, split string) map[string]float64
	FinalizedMetricNames() []string
}

// ParamGrouper names the parameter group of a parameter leaf by its keypath.
type ParamGrouper interface {
	ParamGroup(keypath []string) string
}

// config is every knob and run option that fixes the run, resolved once at setup (config.go) and
// validated by its validate. A knob resolves, first match wins: the run option, a method
// `Name() T` on the experiment, a field `Name` of the experiment, the default; the source that won
// is kept for the config report and for errors. The knobs, their options, defaults and rules are
// the knob table in doc.go (TestDocTableListsEveryHook keeps it whole).
//
// A Device field of a knob's name is a traced input, never the knob: it is skipped, the knob
// falls to its default (the source says why), and New warns, but for Lambda (a Device Lambda is
// the usual auxiliary loss weight).
type config struct {
	maxEpochs resolved[int]
	// maxSteps, valEvery and checkpointEvery make a run step-based (periods.go); 0 keeps epochs.
	maxSteps, valEvery, checkpointEvery resolved[int]
	seed                                resolved[int]
	runDir                              resolved[string]
	accum                               resolved[int]
	clip                                resolved[float64]
	lr                                  resolved[float64]
	lambda                              resolved[float64]
	precision                           resolved[engine.Precision] // WithMixedPrecision (precision.go)
}
