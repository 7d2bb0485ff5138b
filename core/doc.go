// Package core is the Nitro: a thin composer of the modules behind the experiment contract. An
// experiment is a struct with hooks; core.New sets it up and Train, Evaluate and the other verbs
// run it. Guide: docs/experiment.md.
//
//   - New runs setup only; Train, Validate, Evaluate, Predict, Render and SetDevice are the
//     verbs, and ViewModel is the read-only model view the export module (package export) ships
//     bundles from.
//   - A training step is two compiled programs by default (gradient; optimizer), one with
//     WithFusedStep; parameters, gradients and optimizer state stay on the device, a group's
//     small arrays in one flat buffer (records and Parameters still name one tensor per array).
//     WithMixedPrecision("bf16") builds every program on package precision's backend twin, which
//     computes float32 products in bfloat16; everything else, the state included, stays float32.
//   - Manual mode (an experiment with TrainStep) hands the step to the experiment: one program
//     per step in which TrainStep calls hooks.ManualStep's Backward (gradients of an objective
//     with respect to chosen groups only) and StepOptimizer (one group's chain); the
//     loop, validation, checkpoints, logging, phases and stopping stay the framework's.
//   - Nitro keeps setup values, compiled programs and the training state (parameters, optimizer
//     and layer state with the RNG, step, epoch, data position) apart.
//
// Each other concern is a collaborator behind a small interface owned by its module:
//
//   - the batch stream: prefetch (WithPrefetch);
//   - the console: Console (Quiet has none);
//   - the record: logjson.Logger (default JSON Lines at <RunDir>/metrics.jsonl);
//   - monitors: monitors.Monitor (phases and progress);
//   - the checkpointer: checkpoint.Checkpointer (default TopK(3, val_loss, min); WithResume
//     restores exactly).
//
// One process of several (WithDist: a rank and the world size; package dist) hands its Dist to
// BuildData and, on every rank but 0, writes nothing: no logger, a read-only checkpointer, no
// export. With WithCollective (a Collective: package mpi's Comm under mpirun) the processes
// train one model: gradients and validation summed across them, setup refused when they
// disagree on what they run (collective.go, docs/multihost.md). A checkpoint's data position
// counts global batches, so a resume under another world size or batch size continues at the
// same sample (checkpoint.Position.Rebatch) or is refused.
//
// WithInputSpecs builds a Nitro for export or predict with no data. Core never imports
// exportbundle: training links neither it nor its cgo capture shim.
//
// Left to the caller: the experiment's hooks and data, and signals (the CLI turns Ctrl+C into
// Interrupt). Errors name the hook, field or value and the fix; no panic escapes an exported
// function. A Nitro is not safe for concurrent use, except RequestStop, Interrupt,
// RegisterMonitor, Phase and ProgressCounter. Batches route to a hook by the fields its batch
// struct declares, and the batch axis leads every array (GoMLX is row-major).
//
// # The experiment contract
//
// An experiment is a pointer to a struct. New looks, once, for the methods below and for the
// knobs, and for nothing else; a method not listed is never called. contract.go declares the
// traced hooks, the first five interfaces and the knobs; the others are declared in the file
// given. "New" in the last column means New returns the error; a traced hook's result is checked
// when its program is first built, so that error comes from the verb that builds it.
//
//	hook (declared in)                      required    called                      default         refused when
//	Forward(ctx, B) Outputs                 yes         New's shape trace; traced   -               missing, wrong signature; a
//	  (contract.go, reflected)                          in every program                            declared field no split has;
//	                                                                                                it reads a Host field (New)
//	Loss(out, B) *graph.Node                yes; no in  traced in the training      -               missing, wrong signature
//	  (contract.go, reflected)              manual mode programs; in eval without                   (New); not a scalar; no
//	                                                    Metrics                                     gradient path to any
//	                                                                                                parameter of a group
//	Metrics(out, B) map[string]Metric       no          traced in the eval program  val_loss: Loss  wrong signature (New); a
//	  (contract.go, reflected)                          (device residency)          mean per sample Count not a scalar, or an
//	                                                                                                array Sum with a Count
//	TrainMetrics(out, B)                    no          traced in the training      none            wrong signature (New); a
//	  map[string]*graph.Node                            programs; read on logged                    value not a scalar
//	  (contract.go, reflected)                          steps
//	TrainStep(s hooks.ManualStep, B)      no          New's variable trace; one   the automatic   wrong signature; with Accum
//	  hooks.StepResult (contract.go,                   program per optimizer step  loop            > 1, TrainMetrics or a
//	  reflected; engine/manual_step.go                  (manual mode)                               varying opt schedule (New);
//	  holds ManualStep's verbs)                                                                     a Loss or stat not a scalar;
//	                                                                                                a Backward group its
//	                                                                                                objective cannot reach
//	ManualTraining() bool                   no          New, once                   whether         true with no TrainStep;
//	  (manual.go, ManualChooser)                                                    TrainStep is    not bool (New)
//	                                                                                defined
//	SetupOptimizers()                       no          New, once, in manual mode   Levels 0-2      outside manual mode; with
//	  (map[string]optimizers.Rule, error)                                                           OptimizerRule, OptimizerChain
//	  (manual.go, OptimizerSetter)                                                                  or LearningRateGroup; a group
//	                                                                                                missing or unknown (New)
//	BuildModel(ctx) error                   yes         New, once, before the       -               missing; its error (New)
//	  (contract.go, ModelBuilder)                       shape trace
//	BuildData() (prefetch.Data, error)      yes,        New, once, on the real      -               missing with no WithData; no
//	  (contract.go, DataBuilder), or        unless      experiment; the second                      splits, an empty split, a
//	  BuildData(d dist.Dist)                WithData or form gets the run's Dist                    train split that keeps its
//	  (prefetch.Data, error)                WithInput-  (WithDist; default rank 0                   partial batch or does not
//	  (dist.go, DistDataBuilder)            Specs       of 1) to build its shard                    divide by Accum; a BuildData
//	                                                                                                of neither form (New)
//	Derive(prefetch.Data)                   no          New, once, after BuildData; nothing         its error; values that do
//	  (map[string]any, error)                           not under WithInputSpecs                    not fit the fields (New)
//	  (contract.go, Deriver)
//	HostMetrics(out, batch)                 no          host, once per eval batch,  -               its error (the verb); a
//	  (map[string]metrics.Metric, error)                on Forward's outputs; not                   HostMetrics-less host
//	  (hostmetrics.go, HostMetricser)                   with device residency                       residency (New)
//	MetricsResidency() Residency            no          New, once; a run's          host with       a value not device or host;
//	  (hostmetrics.go, MetricsResider)                  WithMetricsResidency wins   HostMetrics,    a residency whose hook is
//	                                                                                else device     missing (New)
//	FinalizeMetrics(acc metrics.Result,     no          host, once per evaluated    scalars as      an array or collection with
//	  split) map[string]float64                         split with at least one     divided         no finalizer; a result not
//	  (contract.go, MetricsFinalizer)                   batch                                       as declared (the verb); the
//	                                                                                                old map signature (New)
//	FinalizedMetricNames() []string         with        New, once: the checkpoint   -               a ranking or stopping
//	  (contract.go, MetricsFinalizer)       Finalize-   and early-stopping metrics                  metric it does not declare
//	                                        Metrics     are checked against it                      (New)
//	Headline() []string                     no          the end of each epoch: the  the ranking     a name the epoch did not
//	  (contract.go, HeadlineMetrics)                    console's epoch line        metric and 3    report (Train)
//	                                                                                others not in a
//	                                                                                numbered family
//	ParamGroup(keypath) string              no          New, once per trainable     one "default"   an empty name; mixed dtypes
//	  (contract.go, ParamGrouper)                       array                       group           in one group (New)
//	OptimizerRule(group) optimizers.Rule    no          New, once per group         RAdam           a rule field the resolved
//	  (hyper.go, RuleChooser)                           (level 1)                                   learning rate overrides (New)
//	OptimizerChain(optimizers.GroupSetup)   no          New, once per group         the rule's      its error (New)
//	  (*optimizers.Chain, error)                        (level 2)                   chain
//	  (hyper.go, ChainBuilder)
//	LearningRateGroup(group) float64        no          New, once per group         LearningRate    -
//	  (hyper.go, GroupLearningRater)
//	LambdaGroup(group) float64              no          New, once per group         Lambda          -
//	  (hyper.go, GroupLambdaer)
//	DecayAnchor(group) optimizers.Anchor    no          New, once per group         zero            -
//	  (hyper.go, DecayAnchorer)
//	NoDecay(keypath, shape) bool            no          New, once per array         1-D arrays      -
//	  (hyper.go, NoDecayer)                                                         are not decayed
//	Schedules() map[string]any              no          New, once; a run's          constants       a key or value schedules
//	  (hyper.go, Scheduler)                             WithSchedules overrides                     refuses; a hyperparameter
//	                                                    it key by key                               nothing sets (New)
//	Checkpointer() checkpoint.Checkpointer  no          New, once; a run's          TopK(3,         a ranking metric validation
//	  (checkpoint.go, CheckpointerChooser)              WithCheckpointer wins       val_loss, min)  does not report (New)
//	Logger() logjson.Logger                 no          New, once; a run's          JSON Lines in   -
//	  (logger.go, LoggerChooser)                        WithLogger wins; nil: no    <RunDir>/
//	                                                    record                      metrics.jsonl
//	CheckpointFilename(checkpoint.NameArgs) no          each save, by an Adopter    its default     -
//	  string                                            checkpointer                names
//	  (checkpoint.go, CheckpointNamer)
//	EarlyStop() earlystop.Policy            no          New, once; a run's          none            an EarlyStop method of
//	  (earlystop.go, EarlyStopChooser)                  WithEarlyStopping or                        another type; a bad policy
//	                                                    WithEarlyStopper wins                       (New)
//	ExportProvenance() map[string]string    no          Export, once, on the host   framework and   an ExportProvenance method
//	  (model.go, ExportProvenancer)                                                 site keys only  of another type (Export)
//	Throughput() Throughput                 no          New, once                   no tokens/s or  TokensPerSample < 1 or a
//	  (throughput.go, Throughputer)                                                 MFU             negative or NaN FLOPs (New)
//	Visualize(VisualSamples)                no          Render, once per call, on   none: Render    missing, or a Visualize
//	  (image.Image, error)                              the host                    refuses         method of another type
//	  (render.go, Visualizer)                                                                       (Render)
//
// B is the hook's batch parameter: a struct of exported *graph.Node fields tagged `batch:"name"` (or
// `batch:"name,optional"`; an untagged field uses its Go name), or map[string]*graph.Node for the
// whole batch. The training programs differentiate Loss plus the terms GoMLX layers collect with
// train.AddLoss; evaluation's val_loss is Loss alone.
//
// The knobs are read by name, each from the first of: its run option, a method Name() on the
// experiment, a field Name, the default (a Device field of that name is a traced input, never the
// knob: it is skipped, and New warns, but for a Device Lambda, the usual loss weight). New refuses a
// method or field of the wrong type, and a value its rule refuses, naming the knob, its value and
// where it came from.
//
//	knob              run option            default      rule
//	MaxEpochs         WithMaxEpochs         1            >= 0
//	MaxSteps          WithMaxSteps          0 (epochs)   >= 0; the horizon in optimizer steps; not with MaxEpochs
//	ValEvery          WithValEvery          0 (epochs)   >= 0; validate, report, checkpoint every N steps
//	CheckpointEvery   WithCheckpointEvery   0 (each val) >= 0; a multiple of ValEvery
//	Seed              WithSeed              42           seeds the model context's RNG
//	RunDir            WithRunDir            runs/<E>     CheckRunDir; holds no earlier run, but for a resume (WithOverwrite)
//	Accum             WithAccum             1            >= 1; 1 under WithFusedStep
//	GradientClipNorm  WithGradientClipNorm  0 (off)      >= 0
//	LearningRate      WithLearningRate      1e-3         != 0 (group rates are ratios to it)
//	Lambda            -                     0            every group's decay coefficient
//
// config (contract.go) resolves and validates the knobs; TestDocTableListsEveryHook holds this
// table to it.
//
// The experiment's fields carry markers (package markers): GraphConst fields bake into the
// programs, Device fields are program inputs (SetDevice changes them), Host fields are read only
// by host code.
package core
