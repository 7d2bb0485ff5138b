package logjson

import (
	"fmt"
	"math"
	"reflect"
	"sort"
)

// FlattenParams returns params with every nested map (any map with string keys) replaced by its
// leaves under dotted keys: {"opt": {"lr": 0.1}} becomes {"opt.lr": 0.1}. Non-map values, slices
// included, are kept as they are; an empty nested map contributes nothing. Flat keys are what to
// log in the first place (nested ones split comparison tables in hosted trackers), so this is
// the fallback for nested input, not a style to aim for. Two paths that flatten to the same key
// ({"a.b": 1, "a": {"b": 2}}) are refused with an error naming the key. params is not modified.
func FlattenParams(params map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(params))
	if err := flattenInto(out, "", reflect.ValueOf(params)); err != nil {
		return nil, err
	}
	return out, nil
}

func flattenInto(out map[string]any, prefix string, m reflect.Value) error {
	keys := m.MapKeys()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		key := k.String()
		if prefix != "" {
			key = prefix + "." + key
		}
		v := m.MapIndex(k)
		for v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String {
			if err := flattenInto(out, key, v); err != nil {
				return err
			}
			continue
		}
		if _, dup := out[key]; dup {
			return fmt.Errorf("logjson: params: two entries flatten to the key %q", key)
		}
		if v.IsValid() && v.CanInterface() {
			out[key] = v.Interface()
		} else {
			out[key] = nil
		}
	}
	return nil
}

// DropNonFinite returns the finite entries of values (NaN and ±Inf removed) and how many were
// dropped. values is not modified; when nothing is dropped the result is values itself.
func DropNonFinite(values map[string]float64) (kept map[string]float64, dropped int) {
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			dropped++
		}
	}
	if dropped == 0 {
		return values, 0
	}
	kept = make(map[string]float64, len(values)-dropped)
	for k, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			kept[k] = v
		}
	}
	return kept, dropped
}
