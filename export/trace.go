package export

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nitro-go/nitro/core"
)

// tryGraph turns a graph-building panic into an error naming what was being built.
func tryGraph(what string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(what, r)
		}
	}()
	fn()
	return nil
}

func panicError(what string, r any) error {
	if e, ok := r.(error); ok {
		return fmt.Errorf("%s: %w", what, e)
	}
	return fmt.Errorf("%s: %v", what, r)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func fieldNames(fields []core.ForwardField) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}
