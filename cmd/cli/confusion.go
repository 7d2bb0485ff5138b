package cli

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
)

// confusionReporter is an experiment that keeps each evaluated split's confusion matrix (the
// MNIST example does, from its FinalizeMetrics): the CLI prints it after the split's metrics.
type confusionReporter interface {
	Confusion(split string) (matrix [][]int, labels []string, ok bool)
}

// sayConfusion prints split's confusion matrix when the experiment kept one: a table in text,
// the matrix and labels as fields in JSON.
func sayConfusion(res results, e any, split string) {
	cr, ok := e.(confusionReporter)
	if !ok {
		return
	}
	m, labels, ok := cr.Confusion(split)
	if !ok || len(m) == 0 {
		return
	}
	res.say(confusionTable(split, m, labels), "confusion", zap.String("split", split), zap.Any("matrix", m), zap.Strings("labels", labels))
}

// confusionTable lays the matrix out with the true class down and the predicted class across.
func confusionTable(split string, m [][]int, labels []string) string {
	name := func(i int) string {
		if i < len(labels) {
			return labels[i]
		}
		return fmt.Sprint(i)
	}
	w := 1
	for i, row := range m {
		w = max(w, len(name(i)))
		for _, v := range row {
			w = max(w, len(fmt.Sprint(v)))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s confusion matrix (rows: true class, columns: predicted):\n%*s", split, w, "")
	for j := range m {
		fmt.Fprintf(&b, " %*s", w, name(j))
	}
	for i, row := range m {
		fmt.Fprintf(&b, "\n%*s", w, name(i))
		for _, v := range row {
			fmt.Fprintf(&b, " %*d", w, v)
		}
	}
	return b.String()
}
