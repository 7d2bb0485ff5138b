package earlystop_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/earlystop"
)

// noState stops never and keeps no state.
type noState struct{}

func (noState) ShouldStop(int, map[string]float64) (bool, string) { return false, "" }

// rawState keeps whatever State returns, and Restore answers as told.
type rawState struct {
	noState
	state   json.RawMessage
	same    bool
	fail    error
	gotBack json.RawMessage
}

func (r *rawState) State() (json.RawMessage, error) { return r.state, r.fail }
func (r *rawState) Restore(d json.RawMessage) (bool, error) {
	r.gotBack = d
	return r.same, r.fail
}

func TestSaveAndRestoreState(t *testing.T) {
	if st, err := earlystop.SaveState(noState{}); st != nil || err != nil {
		t.Fatalf("a stateless policy saved %v, %v", st, err)
	}
	if _, err := earlystop.SaveState(&rawState{state: json.RawMessage("{")}); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("non-JSON state: %v", err)
	}
	if _, err := earlystop.SaveState(&rawState{fail: errors.New("disk")}); err == nil || !strings.Contains(err.Error(), "State: disk") {
		t.Fatalf("a failing State: %v", err)
	}

	// The built-in's state round-trips, and only into a policy of its type.
	es := earlystop.Default()
	es.Observe(map[string]float64{"val_loss": 1})
	ctl, err := earlystop.SaveState(es)
	if err != nil || ctl[earlystop.StateKey] == nil || ctl[earlystop.StateTypeKey] == nil {
		t.Fatalf("SaveState: %v, %v", ctl, err)
	}
	back := earlystop.Default()
	if ok, note, err := earlystop.RestoreState(back, ctl); !ok || note != "" || err != nil {
		t.Fatalf("restore into the built-in: %v %q %v", ok, note, err)
	}
	if b, seen := back.Best(); !seen || b != 1 {
		t.Fatalf("restored best %v %v, want 1", b, seen)
	}
	other := &rawState{same: true}
	if ok, note, err := earlystop.RestoreState(other, ctl); ok || !strings.Contains(note, "this run's policy is a *earlystop_test.rawState") || err != nil || other.gotBack != nil {
		t.Fatalf("another policy's state: %v %q %v (Restore saw %s)", ok, note, err, other.gotBack)
	}

	// Records written while the built-in lived in core name it *earlystop.EarlyStopping.
	legacy := map[string]json.RawMessage{earlystop.StateKey: ctl[earlystop.StateKey], earlystop.StateTypeKey: json.RawMessage(`"*earlystop.EarlyStopping"`)}
	if ok, _, err := earlystop.RestoreState(earlystop.Default(), legacy); !ok || err != nil {
		t.Fatalf("legacy type name: %v %v", ok, err)
	}

	cases := []struct {
		name     string
		p        earlystop.Policy
		ctl      map[string]json.RawMessage
		restored bool
		note     string
		err      string
	}{
		{"stateless", noState{}, ctl, false, "keeps no state", ""},
		{"no state kept", &rawState{same: true}, nil, false, "", ""},
		{"not its own", &rawState{}, map[string]json.RawMessage{earlystop.StateKey: json.RawMessage(`{}`), earlystop.StateTypeKey: json.RawMessage(`"*earlystop_test.rawState"`)}, false, "another metric or mode", ""},
		{"type not JSON", &rawState{}, map[string]json.RawMessage{earlystop.StateKey: json.RawMessage(`{}`), earlystop.StateTypeKey: json.RawMessage(`x`)}, false, "", "early_stopping_type"},
		{"Restore fails", &rawState{fail: errors.New("negative count")}, map[string]json.RawMessage{earlystop.StateKey: json.RawMessage(`{}`), earlystop.StateTypeKey: json.RawMessage(`"*earlystop_test.rawState"`)}, false, "", "negative count"},
	}
	for _, c := range cases {
		ok, note, err := earlystop.RestoreState(c.p, c.ctl)
		if ok != c.restored || (c.note == "") != (note == "") || !strings.Contains(note, c.note) {
			t.Errorf("%s: restored %v note %q; want %v and a note containing %q", c.name, ok, note, c.restored, c.note)
		}
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		}
	}
}
