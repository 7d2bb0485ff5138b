// Package plot draws a training run's metrics.jsonl (the logjson module's JSON Lines) as PNG
// figures with gonum.org/v1/plot: the training loss per optimizer step, raw and smoothed, and
// each other train metric the same way; each validation metric per epoch; steps/s per epoch
// when the data lines carry timing; each data-line value per epoch (data_wait_frac). A loss whose
// values are all positive and span more than two decades is drawn on a log y axis. A
// step-based run (its params line's val_every > 0: it validates every so many optimizer steps,
// across epoch ends) has its validation and data values per validation instead, at their step
// on an axis that spans the train figures' steps. mfu is drawn as a percentage. Read
// parses the file into a Run, Write draws the Run into a directory, one PNG a figure plus an
// index.md that lists each with what it shows and its values' range.
//
// It leaves to the caller which file to read and where to draw (nitro plot <run dir> reads
// <run dir>/metrics.jsonl), and what to do with Run.Warnings: what was tolerated or left out,
// such as the torn lines a crash or a failed write left (skipped, counted in Run.Torn, one
// warning per file) or a figure the file has no data for.
//
// Errors: Read refuses a malformed line with a *LineError naming the line (errors.Is
// ErrMalformed); Write refuses a bad Options and returns the paths it wrote before a failure.
// Every file is written whole or not at all (a temporary file, then a rename).
//
// A Run is plain data: safe to read from many goroutines, not to change while Write draws it.
// Read and Write keep no shared state; calls may run concurrently, on distinct directories.
package plot
