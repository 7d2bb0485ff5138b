// Package board is nitro board: a web page comparing training runs while they train, tailing
// each run directory's metrics.jsonl (no database). Guide: docs/logging.md.
//
// Board is an http.Handler: / is the page, /content its body (the page's script refetches it
// every Config.Refresh), /api/runs the same facts as JSON, /assets/ the embedded stylesheet and
// script. Runs are Config.Runs plus those found in Config.Watch folders, scanned again at every
// refresh (FindRuns), so a run started later appears without a restart. Per run: phase, epoch,
// step, steps/s, stop reason, best checkpoint (the manifest's); the config fields that differ,
// one row per knob (core's resolved max_epochs wins over the experiment's MaxEpochs field, which
// a run option may have overridden); one chart per metric, or per family of metrics differing
// only in a numeric suffix (val_accuracy_0..9: one chart, a legend). The query picks the view
// (x=auto|step|epoch|time, smooth=0..0.99, hide=RUN); the script keeps it in the address. A
// step-based run (its params line's val_every > 0) logs validation and data lines every so many
// steps, several to an epoch: their points are keyed by step, and as logged (x=auto) the
// validation and data charts take the step axis once such a run is shown, where an epoch-based
// run's points sit at their epochs' last steps. Charts
// are SVG drawn on the server: nothing to vendor, the DOM holds the data drawn (a test reads it).
//
// A folder holding a sweep's journal (JournalFile, package sweep's record) is a sweep, found as
// runs are: given, watched, or below a watched folder. Its trials' run dirs (their run_dir,
// inside the sweep dir) are followed as runs named "trial N", and the page opens with the sweep:
// a line of counts and the best trial, the trials ranked best first (complete by value in the
// study's direction, then running, pruned, failed) with their fields' values, every trial's
// reports on one chart (a pruned trial's ending early, crossed), and one scatter per field of
// the metric against its value (log axis for loguniform, categories for a choice). The journal is
// read again when it changes; one that cannot be read is shown with its error (and what was
// read before). Sweeps() and /api/runs's "sweeps" give the same facts.
//
// Limits, whatever a file holds: a line is parsed once its newline arrives; malformed lines (a
// torn write's included) are skipped and counted, said once per file with the first one's line,
// the newest five reasons shown; lines over MaxLineBytes are skipped; a refresh reads at
// most Config.ReadBudget new bytes per run; a series keeps Config.MaxPoints points by decimation,
// 100 metric names per context, 1000 config fields; Config.MaxRuns runs (the page names those
// past it); 10 sweeps, a journal of 64 MiB, 300 trials listed and 100 curves per sweep (the best
// ranked). A vanished run directory is shown gone. Config.LoopbackHostOnly refuses foreign Host
// headers. New names the Config field it refuses. Safe for concurrent use; no goroutines.
package board
