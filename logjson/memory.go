package logjson

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Memory is an in-memory logger for tests: it records every call, in order, and implements
// every optional capability. Its zero value is ready to use; it is safe for concurrent use.
// It records what it is given, including calls after Finish; only an unknown status is refused.
type Memory struct {
	// ID and URL are what RunID and RunURL report. A non-empty ID is also Memory's resumable
	// state ({"run_id": ID}); Reattach sets it back.
	ID, URL string

	mu      sync.Mutex
	calls   []Call
	err     error
	dropped int
}

// Call is one recorded call. Verb says which fields are set.
type Call struct {
	Verb      string         // "params", "metrics", "other", "tags", "confusion", "finish" or "reattach"
	Params    map[string]any // params: a copy of the argument (not flattened)
	Metrics   Metrics        // metrics: a copy, Values included
	Key       string         // other
	Value     any            // other
	Tags      []string       // tags
	Confusion Confusion      // confusion
	Status    Status         // finish
	State     json.RawMessage
}

// Confusion is one LogConfusion call's arguments.
type Confusion struct {
	Matrix [][]int
	Labels []string
	Epoch  int
}

var (
	_ Logger          = (*Memory)(nil)
	_ Tagger          = (*Memory)(nil)
	_ ConfusionLogger = (*Memory)(nil)
	_ Resumable       = (*Memory)(nil)
	_ Identified      = (*Memory)(nil)
	_ DropCounter     = (*Memory)(nil)
)

// Fail makes every later call return err without recording it (nil restores normal service).
func (m *Memory) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

func (m *Memory) record(c Call) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recordLocked(c)
}

func (m *Memory) recordLocked(c Call) error {
	if m.err != nil {
		return m.err
	}
	m.calls = append(m.calls, c)
	return nil
}

// LogParams records a copy of params.
func (m *Memory) LogParams(params map[string]any) error {
	return m.record(Call{Verb: "params", Params: maps.Clone(params)})
}

// LogMetrics records a copy of mt.
func (m *Memory) LogMetrics(mt Metrics) error {
	mt.Values = maps.Clone(mt.Values)
	return m.record(Call{Verb: "metrics", Metrics: mt})
}

// LogOther records key and value.
func (m *Memory) LogOther(key string, value any) error {
	return m.record(Call{Verb: "other", Key: key, Value: value})
}

// LogTags records a copy of tags.
func (m *Memory) LogTags(tags []string) error {
	return m.record(Call{Verb: "tags", Tags: slices.Clone(tags)})
}

// LogConfusion records a copy of its arguments.
func (m *Memory) LogConfusion(matrix [][]int, labels []string, epoch int) error {
	cp := make([][]int, len(matrix))
	for i, row := range matrix {
		cp[i] = slices.Clone(row)
	}
	return m.record(Call{Verb: "confusion", Confusion: Confusion{Matrix: cp, Labels: slices.Clone(labels), Epoch: epoch}})
}

// Finish records status, every time (a test sees a second Finish); a status outside the four
// is refused with ErrUnknownStatus, as the other loggers refuse it.
func (m *Memory) Finish(status Status) error {
	return finishOnce(status, &m.mu, nil, func() error {
		return m.recordLocked(Call{Verb: "finish", Status: status})
	})
}

// CountDropped adds n to Dropped (n <= 0 is ignored). It is a count, not a call: Calls does not
// list it.
func (m *Memory) CountDropped(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > 0 {
		m.dropped += n
	}
}

// Dropped is the sum of every CountDropped.
func (m *Memory) Dropped() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// State is {"run_id": ID}, or nil (no resumable state) while ID is empty.
func (m *Memory) State() (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ID == "" {
		return nil, nil
	}
	return json.Marshal(map[string]string{"run_id": m.ID})
}

// Reattach records state and takes ID from its "run_id".
func (m *Memory) Reattach(state json.RawMessage) error {
	var st struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(state, &st); err != nil {
		return fmt.Errorf("logjson: Memory state: %w", err)
	}
	if err := m.record(Call{Verb: "reattach", State: append(json.RawMessage(nil), state...)}); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ID = st.RunID
	return nil
}

// RunID is m.ID.
func (m *Memory) RunID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ID
}

// RunURL is m.URL.
func (m *Memory) RunURL() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.URL
}

// Info is {"run_id": ID, "run_url": URL}.
func (m *Memory) Info() map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return map[string]any{"run_id": m.ID, "run_url": m.URL}
}

// Calls is every recorded call, in order.
func (m *Memory) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// Params is the argument of every LogParams call, in order.
func (m *Memory) Params() []map[string]any {
	var out []map[string]any
	for _, c := range m.Calls() {
		if c.Verb == "params" {
			out = append(out, c.Params)
		}
	}
	return out
}

// Metrics is every LogMetrics call in context, in order ("" for all contexts).
func (m *Memory) Metrics(context string) []Metrics {
	var out []Metrics
	for _, c := range m.Calls() {
		if c.Verb == "metrics" && (context == "" || c.Metrics.Context == context) {
			out = append(out, c.Metrics)
		}
	}
	return out
}

// Other is the value of the last LogOther call with key, and whether there was one.
func (m *Memory) Other(key string) (any, bool) {
	calls := m.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Verb == "other" && calls[i].Key == key {
			return calls[i].Value, true
		}
	}
	return nil, false
}

// Finishes is the status of every Finish call, in order.
func (m *Memory) Finishes() []Status {
	var out []Status
	for _, c := range m.Calls() {
		if c.Verb == "finish" {
			out = append(out, c.Status)
		}
	}
	return out
}

// Status is the run's status as the contract reads it: the first Finish call's ("" if none).
func (m *Memory) Status() Status {
	if f := m.Finishes(); len(f) > 0 {
		return f[0]
	}
	return ""
}
