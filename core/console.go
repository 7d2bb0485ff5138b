package core

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Console receives the run's human-readable report: the config and binding reports once, one
// summary per epoch, and notices (a recompile and why, a logger that failed). It is how a Nitro
// prints; a Nitro built with Quiet has none, so nothing in the loop tests a quiet flag. Core calls
// it only from the goroutine running the entry point.
type Console interface {
	Reports(config, binding string)
	Epoch(r EpochResult, maxEpochs int)
	Notice(msg string)
}

// WithConsole replaces the text console (WithOutput) with c; nil prints nothing, like Quiet.
func WithConsole(c Console) Option {
	return func(o *options) { o.console, o.consoleSet = c, true }
}

// TextConsole writes the reports and one line per epoch to w: the train loss, the epoch's
// headline metrics (EpochResult.Headline), the time and the step rate.
func TextConsole(w io.Writer) Console { return textConsole{w} }

type textConsole struct{ w io.Writer }

var _ Console = textConsole{}

func (c textConsole) Reports(config, binding string) { fmt.Fprint(c.w, config, binding) }

func (c textConsole) Epoch(r EpochResult, maxEpochs int) {
	var b strings.Builder
	for _, m := range r.HeadlineValues() {
		fmt.Fprintf(&b, "  %s %.4f", m.Name, m.Value)
	}
	fmt.Fprintf(c.w, "%s  train_loss %.4f%s  (%.1fs, %.1f steps/s%s)\n", r.Where(maxEpochs),
		r.TrainLoss, b.String(), r.Seconds, r.StepsPerSecond, r.rates())
}

// Where is how a report line names its period: "epoch 3/8", or with step periods
// "step 500/2000 (epoch 2)".
func (r EpochResult) Where(maxEpochs int) string {
	if r.TotalSteps > 0 {
		return fmt.Sprintf("step %d/%d (epoch %d)", r.Step, r.TotalSteps, r.Epoch)
	}
	return fmt.Sprintf("epoch %d/%d", r.Epoch, maxEpochs)
}

// rates is ", 41.2k tokens/s, MFU 23.1%" for a model with the Throughput hook, else "".
func (r EpochResult) rates() string {
	var s string
	if r.TokensPerSecond > 0 {
		s = fmt.Sprintf(", %.1fk tokens/s", r.TokensPerSecond/1e3)
	}
	if r.MFU > 0 {
		s += fmt.Sprintf(", MFU %.1f%%", 100*r.MFU)
	}
	return s
}

func (c textConsole) Notice(msg string) { fmt.Fprintln(c.w, msg) }

// MemoryConsole records what a Nitro reports, for tests. Safe for concurrent use.
type MemoryConsole struct {
	mu      sync.Mutex
	Config  string
	Binding string
	Epochs  []EpochResult
	Notices []string
}

var _ Console = (*MemoryConsole)(nil)

// Reports implements Console.
func (m *MemoryConsole) Reports(config, binding string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Config, m.Binding = config, binding
}

// Epoch implements Console.
func (m *MemoryConsole) Epoch(r EpochResult, _ int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Epochs = append(m.Epochs, r)
}

// Notice implements Console.
func (m *MemoryConsole) Notice(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Notices = append(m.Notices, msg)
}
