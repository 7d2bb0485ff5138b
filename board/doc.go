// Package board serves a local web page that compares training runs while they train: for each
// run directory, its metrics.jsonl is tailed (no database) and drawn. Board is an http.Handler:
// / is the page, /content its body (the page's script fetches it every Config.Refresh to stay
// live), /api/runs the same facts as JSON, /assets/ the embedded stylesheet and script. The page
// shows per run its phase (read from the record: starting, training epoch N, validated epoch N,
// finished, failed, gone), epoch, step, steps/s, stop reason (the finish line's status), best
// checkpoint (from the folder's manifest, ranked by the mode its metric's name calls for), the
// config fields that differ between runs (the params lines; run_dir left out), and one chart per
// metric with every run overlaid: train per step, validation and data per epoch.
//
// Charts are SVG rendered on the server: no JavaScript library to vendor, audit or update, the
// DOM a test reads is the data drawn, and the page works with scripts off (it then does not
// refresh). Limits, whatever a file holds: a line is parsed only once its newline arrives (a cut
// last line waits, noted on the page); lines that are not the logger's JSON are counted and their
// reasons shown (the newest five); lines over MaxLineBytes are skipped; each refresh reads at
// most Config.ReadBudget new bytes per run, from the offset it reached (a file that shrank is
// read again from the start); each series keeps at most Config.MaxPoints points by decimation,
// 100 metric names per context, 1000 config fields. A run directory that disappears is shown as
// gone with what was read. Errors: New refuses a Config it cannot use, naming the field. Safe for
// concurrent use (requests serialize their refresh); it starts no goroutine, so nothing to close.
package board
