// Package promexport serves a run's progress as Prometheus gauges on /metrics while it trains
// (the CLI's --metrics-addr), opt-in, beside the JSON Lines record. Guide: docs/logging.md.
//
// New listens on an address and serves /metrics (promhttp) from its own goroutine; the Exporter is
// both a monitors.Monitor and a logjson.Logger, and turns what it is told into gauges:
// nitro_step, nitro_epoch, nitro_loss, nitro_steps_per_second, nitro_steps_per_epoch,
// nitro_validation_metric{metric}, nitro_data_wait_fraction, nitro_phase{phase} (one series per
// phase leaf, 1 for the phase of the last transition, all 0 before the first),
// nitro_run_status{status} (1 for the first Finish status), and, read at scrape time, the
// counters nitro_progress_total and nitro_compile_cache_hits_total/misses_total
// (Options.CacheStats). NewServeMetrics is a model server's: request and failure counters, a
// latency histogram per model, the in-flight gauge, the rejected-by-limit counter.
//
// Left to the caller: registering the Exporter as a monitor (Tracker.Register or
// monitors.Register) and passing it as, or inside logjson.Multi with, the run's logger; calling
// Close (it stops the server and waits for it; idempotent). Params and free-form values are
// accepted and not exported. Errors: New names the address it could not listen on and refuses a
// registry that already holds nitro_* collectors; Finish refuses an unknown status
// (logjson.ErrUnknownStatus); nothing else fails, so the exporter never stops a run.
// Everything is safe for concurrent use; CacheStats must be too (scrapes call it).
package promexport
