package earlystop

import (
	"encoding/json"
	"fmt"
)

// A policy's progress travels in a checkpoint's control state under two keys: its State, and
// the policy's Go type, so a state is only ever restored into the kind of policy that wrote it.
const (
	StateKey     = "early_stopping"
	StateTypeKey = "early_stopping_type"
)

// legacyBuiltinType is the built-in policy's type as records written before this package held
// it name it; such a state is the built-in's.
const legacyBuiltinType = "*earlystop.EarlyStopping"

// TypeName names p's Go type as a control state keeps it.
func TypeName(p Policy) string { return fmt.Sprintf("%T", p) }

// SaveState is p's part of a control state: nil when p keeps no state (is not Stateful). Its
// errors say what failed without a prefix; the caller names the policy.
func SaveState(p Policy) (map[string]json.RawMessage, error) {
	s, ok := p.(Stateful)
	if !ok {
		return nil, nil
	}
	st, err := s.State()
	if err != nil {
		return nil, fmt.Errorf("State: %w", err)
	}
	if !json.Valid(st) {
		return nil, fmt.Errorf("State returned %q, which is not JSON", st)
	}
	typ, _ := json.Marshal(TypeName(p))
	return map[string]json.RawMessage{StateKey: st, StateTypeKey: typ}, nil
}

// RestoreState takes p's progress back from a control state (ctl, the whole map; nil when the
// record kept none). restored says whether p took a state back; note, when not empty, says for
// the console why p starts afresh instead (no state kept, another policy's state, or one p calls
// not its own). A state that does not decode, or a Restore that fails, is an error: the record is
// damaged, and a resume must not guess.
func RestoreState(p Policy, ctl map[string]json.RawMessage) (restored bool, note string, err error) {
	s, stateful := p.(Stateful)
	if !stateful {
		return false, fmt.Sprintf("the early-stopping policy %T keeps no state (no State and Restore methods), so it starts afresh", p), nil
	}
	st, ok := ctl[StateKey]
	if !ok {
		return false, "", nil
	}
	recorded := TypeName((*EarlyStopping)(nil)) // records before the type was kept hold the built-in's
	if raw, ok := ctl[StateTypeKey]; ok {
		if err := json.Unmarshal(raw, &recorded); err != nil {
			return false, "", fmt.Errorf("control state: %s: %w", StateTypeKey, err)
		}
		if recorded == legacyBuiltinType {
			recorded = TypeName((*EarlyStopping)(nil))
		}
	}
	if recorded != TypeName(p) {
		return false, fmt.Sprintf("the checkpoint's early-stopping state is a %s's, this run's policy is a %s; early stopping starts afresh", recorded, TypeName(p)), nil
	}
	same, err := s.Restore(st)
	if err != nil {
		return false, "", err
	}
	if !same {
		return false, "the checkpoint's early-stopping state is for another metric or mode; early stopping starts afresh", nil
	}
	return true, "", nil
}
