package core_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// Deep has two Dense layers (two scopes), for parameter groups.
type Deep struct{ coretest.Base }

func (*Deep) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	h := layers.Dense(ctx.In("backbone"), in.X, true, 8)
	return core.Outputs{"pred": layers.Dense(ctx.In("head"), h, true, 1)}
}

// newErr sets up e expecting an error and returns it.
func newErr(t testing.TB, e any, d prefetch.Data, opts ...core.Option) error {
	t.Helper()
	var all []core.Option
	if d != nil {
		all = append(all, core.WithData(d))
	}
	n, err := core.New(e, append(coretest.GoOpts(nil, all...), opts...)...)
	if err == nil {
		t.Fatalf("core.New(%T) succeeded (%v); want an error", e, n != nil)
	}
	return err
}

// wantContains fails unless s contains every want.
func wantContains(t testing.TB, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

func newCache() *compilecache.Cache { return compilecache.New() }

// must returns v, panicking on err (for values a test builds from known-good inputs).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
