package core

import "fmt"

// Logger receives a run's records. It is the consumer-side contract; the logjson module's JSON
// Lines logger (and any tracker adapter) satisfies it. A Logger's errors never stop training:
// logging is observation, not control, so a failed write is reported on the Nitro's output.
type Logger interface {
	// LogOther records one named value of the run, e.g. "binding_report" or "config_report".
	LogOther(key string, value any) error
	// LogMetrics records scalar metrics at an optimizer step and epoch.
	LogMetrics(step, epoch int, metrics map[string]float64) error
}

// WithLogger hands the run's records to l.
func WithLogger(l Logger) Option { return func(o *options) { o.logger = l } }

// MemoryLogger is an in-memory Logger for tests and notebooks.
type MemoryLogger struct {
	Other   map[string]any
	Metrics []LoggedMetrics
}

// LoggedMetrics is one LogMetrics call.
type LoggedMetrics struct {
	Step, Epoch int
	Metrics     map[string]float64
}

var _ Logger = (*MemoryLogger)(nil)

// LogOther implements Logger.
func (m *MemoryLogger) LogOther(key string, value any) error {
	if m.Other == nil {
		m.Other = map[string]any{}
	}
	m.Other[key] = value
	return nil
}

// LogMetrics implements Logger.
func (m *MemoryLogger) LogMetrics(step, epoch int, metrics map[string]float64) error {
	c := make(map[string]float64, len(metrics))
	for k, v := range metrics {
		c[k] = v
	}
	m.Metrics = append(m.Metrics, LoggedMetrics{Step: step, Epoch: epoch, Metrics: c})
	return nil
}

func (n *Nitro) logOther(key string, value any) {
	if n.logger == nil {
		return
	}
	if err := n.logger.LogOther(key, value); err != nil {
		n.warn(fmt.Sprintf("logger: %s: %v", key, err))
	}
}

func (n *Nitro) logMetrics(metrics map[string]float64) {
	if n.logger == nil {
		return
	}
	if err := n.logger.LogMetrics(n.st.step, n.st.epoch, metrics); err != nil {
		n.warn(fmt.Sprintf("logger: metrics: %v", err))
	}
}
