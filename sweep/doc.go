// Package sweep is a hyperparameter search whose record is an Optuna journal: a search space of
// named fields (Space, parsed from "Name=kind:args"), samplers that propose each trial's values
// (Grid, Random, TPE), a pruner that stops a trial early on its intermediate values (ASHA), the
// record itself (Journal: append-only JSON lines that optuna.load_study reads, fsynced per
// operation, so a kill loses at most the running trials' unreported steps), and Run, which drives
// a caller's Objective over the trials, K at a time, and on resume skips finished trials and
// hands interrupted ones back to the Objective to continue from their own checkpoints.
//
// Left to the caller: what a trial is (the Objective trains a run and reports its validation
// metric), where its checkpoints live, which fields recompile. Parameter values are kept as
// Optuna keeps them (a float; a choice's index into its list) and given to the Objective also as
// text in the form `--set Name=value` takes.
//
// Errors name the parameter, the trial or the journal line and the fix; a record that is not a
// sweep's, or one whose search space differs from the one asked for, is refused before a trial
// runs. Samplers and pruners are pure functions of their inputs (seeded), so a resumed sweep
// proposes what an uninterrupted one would. Run is safe to call from one goroutine per sweep
// dir (a lock file refuses a second process); Journal is goroutine-safe; Space is read-only.
package sweep
