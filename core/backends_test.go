package core_test

import (
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/internal/prereq"
)

// onBackends runs f as one subtest per backend, pure Go and XLA, with the options that pick it
// and a compile cache the subtest's Nitros share (appended after goOpts' or ckptOpts' own, so
// they win; sharing spares the XLA compiles, and a program reused from the cache is what a
// process's second Nitro gets anyway). Bitwise claims (a resume, a prefetch fan-out) must hold on
// the backend users train on, not only on pure Go. Without the plugin the XLA subtest is a
// visible skip, and in CI a failure.
func onBackends(t *testing.T, f func(t *testing.T, on []core.Option)) {
	t.Helper()
	on := func(name string) []core.Option {
		return []core.Option{core.WithBackend(name), core.WithCache(compilecache.New())}
	}
	t.Run(backend.Go, func(t *testing.T) { f(t, on(backend.Go)) })
	t.Run(backend.XLA, func(t *testing.T) {
		if _, err := backend.Resolve(backend.XLA); err != nil {
			prereq.XLAPlugin.Need(t, err) // absent: a skip, a failure in CI; broken: a failure
		}
		f(t, on(backend.XLA))
	})
}
