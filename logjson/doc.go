// Package logjson owns the logger contract and its shipped loggers. Logger is the required part
// (LogParams, LogMetrics with step/epoch/context, LogOther, Finish with one of four statuses);
// Tagger, ConfusionLogger, Resumable, Identified, DropCounter and Backender are optional
// capabilities, reached through the helpers TypeName, State, Reattach, RunID, RunURL, Info and
// Backend (DropCounter by a type assertion). JSONLogger writes one JSON object per line with a
// "type" discriminator, opening its file lazily in append mode; ZapLogger maps each call to one
// zap entry; NewDiagnostics builds the framework's own zap logger (console, plain text or JSON); Memory
// records calls for tests; Multi fans out.
//
// Left to the caller: choosing and pinning the path (<run dir>/metrics.jsonl), calling Finish
// (the first status wins, so a deferred completed cannot overwrite an error), dropping
// non-finite values before LogMetrics (DropNonFinite) and handing their count to a DropCounter
// (JSONLogger also drops and counts what still reaches it), storing State's type name and data
// in the checkpoint record, and treating a nil Logger as "no logging". Errors: file errors name
// the path; ErrNoPath, ErrFinished, ErrReservedKey, ErrUnknownStatus, ErrTypeMismatch,
// ErrNotResumable and ErrBadState are matched with errors.Is. Every logger here is safe for
// concurrent use; a Logger's error should not stop training.
package logjson
