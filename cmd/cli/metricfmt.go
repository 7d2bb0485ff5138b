package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nitro-go/nitro/core"
)

// metric is one labelled value.
type metric struct {
	name  string
	value float64
}

// prefixed is m sorted by name, each labelled prefix+name unless it already starts with prefix
// (test_accuracy, val_loss), so a line says which split it is about. With split, core.ValLoss,
// the Loss fallback of an experiment without a Metrics hook, which is named val_loss whatever the
// split, is labelled <prefix>loss.
func prefixed(prefix string, m map[string]float64, split bool) []metric {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]metric, len(keys))
	for i, k := range keys {
		label := k
		if split && k == core.ValLoss {
			label = "loss"
		}
		if !strings.HasPrefix(label, prefix) {
			label = prefix + label
		}
		out[i] = metric{label, m[k]}
	}
	return out
}

// fmtMetrics prints a split's metrics m as " name value" pairs, labelled as prefixed does.
func fmtMetrics(prefix string, m map[string]float64) string {
	var b strings.Builder
	for _, x := range prefixed(prefix, m, true) {
		fmt.Fprintf(&b, " %s %.4f", x.name, x.value)
	}
	return b.String()
}
