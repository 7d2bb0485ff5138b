// Package logjson is the run's record: the Logger contract core writes to, and the loggers that
// ship, chiefly JSONLogger, which writes <run dir>/metrics.jsonl as JSON Lines with a "type" on
// each line (params, other, metrics by context, confusion, finish).
// Guide: docs/logging.md.
//
// Logger is the required part (LogParams, LogMetrics with step/epoch/context, LogOther, Finish
// with one of four statuses); Tagger, ConfusionLogger, Resumable, Identified, DropCounter and
// Backender are optional capabilities, reached through TypeName, State, Reattach, RunID, RunURL,
// Info and Backend (DropCounter by a type assertion). JSONLogger opens its file lazily in append
// mode; ZapLogger maps each call to one zap entry; NewDiagnostics builds the framework's own zap
// logger (console, plain text or JSON); Memory records calls for tests; Multi fans out.
//
// Left to the caller: choosing and pinning the path, calling Finish (the first status wins, so
// a deferred completed cannot overwrite an error), dropping non-finite values (DropNonFinite) and
// handing their count to a DropCounter (JSONLogger also drops and counts what reaches it),
// storing State in the checkpoint record, treating a nil Logger as "no logging". Errors: file
// errors name the path; ErrNoPath, ErrFinished, ErrReservedKey, ErrUnknownStatus,
// ErrTypeMismatch, ErrNotResumable and ErrBadState match with errors.Is. Every logger here is
// safe for concurrent use; a Logger's error should not stop training.
package logjson
