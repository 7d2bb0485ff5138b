package logjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// MultiLogger fans every call out to its members, in order. See Multi.
type MultiLogger struct {
	members []Logger
}

var (
	_ Logger          = (*MultiLogger)(nil)
	_ Tagger          = (*MultiLogger)(nil)
	_ ConfusionLogger = (*MultiLogger)(nil)
	_ Resumable       = (*MultiLogger)(nil)
	_ Identified      = (*MultiLogger)(nil)
	_ Backender       = (*MultiLogger)(nil)
	_ DropCounter     = (*MultiLogger)(nil)
	_ RunDirUser      = (*MultiLogger)(nil)
)

// Multi returns a logger that calls every non-nil logger in turn. Every member is called even
// when an earlier one fails; the errors are joined, each prefixed with its member's TypeName.
// LogTags, LogConfusion and CountDropped reach the members that implement them. Its state is a JSON array
// with one {"type","state"} entry per member (null for members without state), and Reattach
// hands each entry back to its member through Reattach, with the same type check. It is as safe
// for concurrent use as its members are.
func Multi(loggers ...Logger) *MultiLogger {
	m := &MultiLogger{}
	for _, l := range loggers {
		if l != nil {
			m.members = append(m.members, l)
		}
	}
	return m
}

// UseRunDir passes the run directory to the members that keep files there.
func (m *MultiLogger) UseRunDir(runDir string) error {
	return m.each(func(l Logger) error {
		if u, ok := l.(RunDirUser); ok {
			return u.UseRunDir(runDir)
		}
		return nil
	})
}

// Members returns the loggers m calls, in order (a copy).
func (m *MultiLogger) Members() []Logger { return append([]Logger(nil), m.members...) }

func (m *MultiLogger) each(f func(Logger) error) error {
	var errs []error
	for _, l := range m.members {
		if err := f(l); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", TypeName(l), err))
		}
	}
	return errors.Join(errs...)
}

// LogParams calls every member.
func (m *MultiLogger) LogParams(params map[string]any) error {
	return m.each(func(l Logger) error { return l.LogParams(params) })
}

// LogMetrics calls every member.
func (m *MultiLogger) LogMetrics(mt Metrics) error {
	return m.each(func(l Logger) error { return l.LogMetrics(mt) })
}

// LogOther calls every member.
func (m *MultiLogger) LogOther(key string, value any) error {
	return m.each(func(l Logger) error { return l.LogOther(key, value) })
}

// Finish calls every member.
func (m *MultiLogger) Finish(status Status) error {
	return m.each(func(l Logger) error { return l.Finish(status) })
}

// LogTags calls every member that is a Tagger.
func (m *MultiLogger) LogTags(tags []string) error {
	return m.each(func(l Logger) error {
		if t, ok := l.(Tagger); ok {
			return t.LogTags(tags)
		}
		return nil
	})
}

// LogConfusion calls every member that is a ConfusionLogger.
func (m *MultiLogger) LogConfusion(matrix [][]int, labels []string, epoch int) error {
	return m.each(func(l Logger) error {
		if c, ok := l.(ConfusionLogger); ok {
			return c.LogConfusion(matrix, labels, epoch)
		}
		return nil
	})
}

// CountDropped tells every member that is a DropCounter.
func (m *MultiLogger) CountDropped(n int) {
	for _, l := range m.members {
		if dc, ok := l.(DropCounter); ok {
			dc.CountDropped(n)
		}
	}
}

type memberState struct {
	Type  string          `json:"type"`
	State json.RawMessage `json:"state"`
}

// State is one entry per member, or nil when no member has state.
func (m *MultiLogger) State() (json.RawMessage, error) {
	entries := make([]*memberState, len(m.members))
	have := false
	for i, l := range m.members {
		typ, st, err := State(l)
		if err != nil {
			return nil, err
		}
		if st != nil {
			entries[i] = &memberState{Type: typ, State: st}
			have = true
		}
	}
	if !have {
		return nil, nil
	}
	return json.Marshal(entries)
}

// Reattach hands each recorded entry to its member; the member count must match the record's.
func (m *MultiLogger) Reattach(state json.RawMessage) error {
	var entries []*memberState
	if err := json.Unmarshal(state, &entries); err != nil {
		return fmt.Errorf("logjson: Multi state: %w", err)
	}
	if len(entries) != len(m.members) {
		return fmt.Errorf("%w: the checkpoint recorded %d loggers, the run has %d", ErrTypeMismatch, len(entries), len(m.members))
	}
	var errs []error
	for i, e := range entries {
		if e == nil {
			continue
		}
		if err := Reattach(m.members[i], e.Type, e.State); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RunID is the first non-empty member RunID.
func (m *MultiLogger) RunID() string {
	for _, l := range m.members {
		if id := RunID(l); id != "" {
			return id
		}
	}
	return ""
}

// RunURL is the first non-empty member RunURL.
func (m *MultiLogger) RunURL() string {
	for _, l := range m.members {
		if u := RunURL(l); u != "" {
			return u
		}
	}
	return ""
}

// Info is {"loggers": [each member's Info]}, plus run_id and run_url when a member has them.
func (m *MultiLogger) Info() map[string]any {
	infos := make([]any, len(m.members))
	for i, l := range m.members {
		infos[i] = Info(l)
	}
	out := map[string]any{"loggers": infos}
	if id := m.RunID(); id != "" {
		out["run_id"] = id
	}
	if u := m.RunURL(); u != "" {
		out["run_url"] = u
	}
	return out
}

// Backend is the members, in order.
func (m *MultiLogger) Backend() any { return slices.Clone(m.members) }
