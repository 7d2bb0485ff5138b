// Package monitors will own run observation: the phase tree, the monitor registry, a progress
// counter and work-in-flight, and the shipped monitors (progress bar, stall watchdog, heartbeat).
//
// Status: contract reserved, not implemented yet. Monitors will run in their own goroutines with
// explicit teardown, never inside the driver's step sequence.
package monitors
