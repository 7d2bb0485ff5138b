package logjson_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/logjson"
)

func TestTypeName(t *testing.T) {
	cases := []struct {
		l    logjson.Logger
		want string
	}{
		{nil, ""},
		{logjson.NewJSONLogger(""), "*github.com/nitro-go/nitro/logjson.JSONLogger"},
		{&logjson.Memory{}, "*github.com/nitro-go/nitro/logjson.Memory"},
		{logjson.NewZap(nil), "*github.com/nitro-go/nitro/logjson.ZapLogger"},
		{valueLogger{}, "github.com/nitro-go/nitro/logjson_test.valueLogger"},
	}
	for _, c := range cases {
		if got := logjson.TypeName(c.l); got != c.want {
			t.Errorf("TypeName(%T) = %q, want %q", c.l, got, c.want)
		}
	}
}

// valueLogger is a non-pointer logger with a state that is not JSON.
type valueLogger struct{ state string }

func (valueLogger) LogParams(map[string]any) error    { return nil }
func (valueLogger) LogMetrics(logjson.Metrics) error  { return nil }
func (valueLogger) LogOther(string, any) error        { return nil }
func (valueLogger) Finish(logjson.Status) error       { return nil }
func (v valueLogger) State() (json.RawMessage, error) { return json.RawMessage(v.state), nil }
func (valueLogger) Reattach(json.RawMessage) error    { return errors.New("cannot") }

func TestStateAndReattach(t *testing.T) {
	src := &logjson.Memory{ID: "run-7"}
	typ, st, err := logjson.State(src)
	must(t, err)
	if typ != logjson.TypeName(src) || string(st) != `{"run_id":"run-7"}` {
		t.Fatalf("State = %q, %s", typ, st)
	}

	dst := &logjson.Memory{}
	must(t, logjson.Reattach(dst, typ, st))
	if dst.RunID() != "run-7" {
		t.Errorf("reattached RunID = %q", dst.RunID())
	}
	if calls := dst.Calls(); len(calls) != 1 || calls[0].Verb != "reattach" {
		t.Errorf("calls = %+v", calls)
	}

	// Another logger type: refused with both names.
	jl := logjson.NewJSONLogger("")
	err = logjson.Reattach(jl, typ, st)
	if !errors.Is(err, logjson.ErrTypeMismatch) ||
		!strings.Contains(err.Error(), typ) || !strings.Contains(err.Error(), logjson.TypeName(jl)) {
		t.Errorf("mismatch: %v", err)
	}
	// No logger at all.
	if err := logjson.Reattach(nil, typ, st); !errors.Is(err, logjson.ErrTypeMismatch) {
		t.Errorf("nil logger: %v", err)
	}
	// Same type name, but the type cannot take state.
	if err := logjson.Reattach(jl, logjson.TypeName(jl), st); !errors.Is(err, logjson.ErrNotResumable) {
		t.Errorf("not resumable: %v", err)
	}
	// No recorded state: nothing attempted, whatever the type.
	for _, empty := range []json.RawMessage{nil, json.RawMessage(" null "), {}} {
		if err := logjson.Reattach(jl, "some.Other", empty); err != nil {
			t.Errorf("Reattach(%q) = %v", empty, err)
		}
	}
	// The logger's own refusal is passed on.
	if err := logjson.Reattach(valueLogger{}, logjson.TypeName(valueLogger{}), st); err == nil || !strings.Contains(err.Error(), "cannot") {
		t.Errorf("logger's refusal: %v", err)
	}
}

func TestStateEdgeCases(t *testing.T) {
	if typ, st, err := logjson.State(&logjson.Memory{}); typ != "" || st != nil || err != nil {
		t.Errorf("no ID: %q %s %v", typ, st, err)
	}
	if typ, st, err := logjson.State(valueLogger{state: "null"}); typ != "" || st != nil || err != nil {
		t.Errorf("null state: %q %s %v", typ, st, err)
	}
	if _, _, err := logjson.State(valueLogger{state: "0xc000123"}); !errors.Is(err, logjson.ErrBadState) {
		t.Errorf("bad state: %v", err)
	}
	if typ, st, err := logjson.State(nil); typ != "" || st != nil || err != nil {
		t.Errorf("nil: %q %s %v", typ, st, err)
	}
}

func TestHelpersOnNil(t *testing.T) {
	if logjson.RunID(nil) != "" || logjson.RunURL(nil) != "" || logjson.Backend(nil) != nil {
		t.Error("nil logger has an identity")
	}
	if m := logjson.Info(nil); m == nil || len(m) != 0 {
		t.Errorf("Info(nil) = %v", m)
	}
}

func TestStatusValid(t *testing.T) {
	for _, s := range []logjson.Status{logjson.StatusCompleted, logjson.StatusEarlyStop, logjson.StatusRequested, logjson.StatusError} {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	for _, s := range []logjson.Status{"", "Completed", "stopped"} {
		if s.Valid() {
			t.Errorf("%q valid", s)
		}
	}
}

func TestFlattenParams(t *testing.T) {
	in := map[string]any{
		"seed":  42,
		"opt":   map[string]any{"lr": 0.1, "sched": map[string]string{"kind": "cosine"}},
		"empty": map[string]any{},
		"dims":  []int{1, 2},
		"none":  nil,
	}
	got, err := logjson.FlattenParams(in)
	must(t, err)
	want := map[string]any{"seed": 42, "opt.lr": 0.1, "opt.sched.kind": "cosine", "dims": []int{1, 2}, "none": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, ok := in["opt.lr"]; ok {
		t.Error("input modified")
	}
	if got, err := logjson.FlattenParams(nil); err != nil || len(got) != 0 {
		t.Errorf("nil: %v %v", got, err)
	}
}

func TestDropNonFinite(t *testing.T) {
	in := map[string]float64{"a": 1, "b": math.NaN(), "c": math.Inf(-1), "d": math.Inf(1), "e": 0}
	kept, dropped := logjson.DropNonFinite(in)
	if dropped != 3 || !reflect.DeepEqual(kept, map[string]float64{"a": 1, "e": 0}) {
		t.Errorf("kept %v dropped %d", kept, dropped)
	}
	if len(in) != 5 {
		t.Error("input modified")
	}
	if kept, dropped := logjson.DropNonFinite(nil); kept != nil || dropped != 0 {
		t.Errorf("nil: %v %d", kept, dropped)
	}
}
