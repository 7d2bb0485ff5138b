package core

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The console's epoch line shows the train loss and a few headline metrics, not every metric:
// ten per-class accuracies beside the loss hide the number a person looks for. Every metric
// stays in the record, on the board and in nitro evaluate --all.

// maxDefaultHeadline bounds the headline chosen when the experiment declares none.
const maxDefaultHeadline = 4

// numbered matches a member of a numbered family (val_accuracy_3), left off the default headline.
var numbered = regexp.MustCompile(`_[0-9]+$`)

// headline is the metric names (as the record names them: val_*, train_*) the epoch line of
// res shows: the experiment's Headline() when it declares one, each of which res must hold
// (else an error naming the hook, the name and the names there are); otherwise the checkpoint's
// ranking metric, then the other metrics not in a numbered family, sorted, at most
// maxDefaultHeadline in all.
func (n *Nitro) headline(res EpochResult) ([]string, error) {
	have := map[string]bool{}
	for k := range res.Train {
		have[withPrefixName("train_", k)] = true
	}
	for k := range res.Val {
		have[withPrefixName("val_", k)] = true
	}
	if h, ok := n.spec.e.(HeadlineMetrics); ok {
		names := h.Headline()
		for _, name := range names {
			if !have[name] {
				return nil, fmt.Errorf("Headline() of %s names %q, which epoch %d did not report: name metrics as the record does (%s)",
					n.spec.typeName, name, res.Epoch, strings.Join(sortedKeys(have), ", "))
			}
		}
		return names, nil
	}
	var out []string
	if m := n.ck.metric; have[m] {
		out = append(out, m)
	}
	for _, name := range sortedKeys(have) {
		if len(out) == maxDefaultHeadline {
			break
		}
		if !numbered.MatchString(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// headlineValue is the value of a headline name in res (its train or val map).
func headlineValue(res EpochResult, name string) float64 {
	if v, ok := res.Val[name]; ok {
		return v
	}
	if v, ok := res.Val[strings.TrimPrefix(name, "val_")]; ok && strings.HasPrefix(name, "val_") {
		return v
	}
	if v, ok := res.Train[strings.TrimPrefix(name, "train_")]; ok && strings.HasPrefix(name, "train_") {
		return v
	}
	return res.Train[name]
}

// HeadlineValues is res's headline metrics with their values, in order, for a Console to print.
func (res EpochResult) HeadlineValues() []NamedValue {
	out := make([]NamedValue, len(res.Headline))
	for i, name := range res.Headline {
		out[i] = NamedValue{Name: name, Value: headlineValue(res, name)}
	}
	return out
}

// NamedValue is one metric of an epoch line.
type NamedValue struct {
	Name  string
	Value float64
}
