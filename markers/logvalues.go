package markers

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// LogValues is e's exported fields as flat loggable params, by field name, in a map a logger can
// write as one record. e is an E or a *E. The rule, per field:
//   - a plain scalar is kept as a JSON value (plainValue: bool, int64, uint64, float64, string;
//     a float32 as it prints, a non-finite float or a named type's String() as text);
//   - a Device field is read by its host value, under the same rule;
//   - a GraphConst field of any other type is its printed value, as GraphConstValues prints it:
//     that text is what the compile key compares, so it is worth having on record;
//   - any other non-scalar (a Host slice, map, struct or pointer, which may be a whole dataset)
//     is left out, as is a String method that panics: a param is never worth failing a run.
func LogValues(e any) (map[string]any, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, f := range tr.Fields {
		if !f.Exported {
			continue
		}
		fv := fieldValue(v, f)
		if x, ok := plainValue(fv); ok {
			out[f.Name] = x
		} else if f.Kind == KindGraphConst {
			out[f.Name] = printValue(fv)
		}
	}
	return out, nil
}

// ValueText is a plain scalar's text: a bool, an integer, a float (a float32 as it prints, a
// non-finite one as "NaN" or "+Inf"), a string, or a named non-pointer type's String(). ok is
// false for anything else, and for a String method that panics.
func ValueText(v reflect.Value) (text string, ok bool) {
	x, ok := plainValue(v)
	if !ok {
		return "", false
	}
	return fmt.Sprint(x), true
}

// plainValue is v as a JSON scalar: a bool, an int64, a uint64, a finite float64 (a float32 as it
// prints, so 0.1 stays 0.1), a string; a non-finite float as its text ("NaN", "+Inf"), which JSON
// cannot hold as a number; a named non-pointer type with a String method as that text. ok is
// false for anything else.
func plainValue(v reflect.Value) (x any, ok bool) {
	for v.IsValid() && v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() || !v.CanInterface() {
		return nil, false
	}
	if st, isStringer := v.Interface().(fmt.Stringer); isStringer && v.Type().PkgPath() != "" && v.Kind() != reflect.Pointer {
		return stringOf(st)
	}
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint(), true
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64), true
		}
		if v.Kind() == reflect.Float32 {
			f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
		}
		return f, true
	case reflect.String:
		return v.String(), true
	}
	return nil, false
}

// stringOf is st.String(), or not ok when it panics: a message or a param is never worth a panic.
func stringOf(st fmt.Stringer) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			s, ok = "", false
		}
	}()
	return st.String(), true
}
