// Package board is nitro board: a web page comparing training runs while they train, tailing
// each run directory's metrics.jsonl (no database). Guide: docs/logging.md.
//
// Board is an http.Handler: / is the page, /content its body (the page's script refetches it
// every Config.Refresh), /api/runs the same facts as JSON, /assets/ the embedded stylesheet and
// script. Per run: phase (read from the record: starting,
// training epoch N, validated epoch N, finished, failed, gone), epoch, step, steps/s, stop reason
// (the finish line), best checkpoint (the manifest's, by the mode its metric's name calls for);
// the config fields that differ between runs (params lines, run_dir left out); one chart per
// metric, runs overlaid: train per step, validation and data per epoch. Charts are SVG drawn on
// the server: no JavaScript library to vendor or update, the DOM holds the data drawn (a test
// reads it), and the page still shows with scripts off (it just does not refresh).
//
// Limits, whatever a file holds: a line is parsed once its newline arrives (a cut last line
// waits, noted); malformed lines are counted and the newest five reasons shown; lines over
// MaxLineBytes are skipped; a refresh reads at most Config.ReadBudget new bytes per run from the
// offset reached (a file that shrank is read again from the start); a series keeps Config.MaxPoints
// points by decimation, 100 metric names per context, 1000 config fields. A run directory that
// disappears is shown gone with what was read. Config.LoopbackHostOnly refuses foreign Host
// headers (DNS rebinding). Errors: New names the Config field it refuses. Safe for concurrent
// use (refreshes serialize); it starts no goroutine, so there is nothing to close.
package board
