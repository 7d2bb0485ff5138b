// Package runstatus is the one vocabulary of how a training run ended: what core's Train reports
// (StopReason), what a checkpoint records (its stop reason) and what a logger finishes with
// (logjson.Status is this type). It imports nothing, so every module may use it.
package runstatus

import (
	"errors"
	"fmt"
)

// Status is how a run ended, or why it stopped.
type Status string

// The four statuses. A run that trained to its last epoch is Completed; one that early stopping
// ended is EarlyStop; one a stop request (RequestStop, Ctrl+C) ended, after its epoch, is
// Requested; Error only finishes a logger (a run that failed records no checkpoint for it).
const (
	Completed Status = "completed"
	EarlyStop Status = "early_stop"
	Requested Status = "requested"
	Error     Status = "error"
)

// ErrUnknown is what Check wraps for a status outside the four.
var ErrUnknown = errors.New("unknown run status")

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case Completed, EarlyStop, Requested, Error:
		return true
	}
	return false
}

// Check is nil for one of the four statuses, else ErrUnknown naming s and the four.
func (s Status) Check() error {
	if s.Valid() {
		return nil
	}
	return fmt.Errorf("%w: %q (want completed, early_stop, requested or error)", ErrUnknown, s)
}
