package checkpoint

import (
	"fmt"
	"sort"
	"strings"
)

// DiffValues lists the fields whose values differ between a record's and now's, one line each,
// "field NAME: checkpoint X, now Y" (a side that lacks the field says "(absent)"), sorted by name.
func DiffValues(was, now map[string]string) []string {
	names := make([]string, 0, len(was)+len(now))
	for k := range was {
		names = append(names, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		a, inWas := was[k]
		b, inNow := now[k]
		if inWas && inNow && a == b {
			continue
		}
		if !inWas {
			a = "(absent)"
		}
		if !inNow {
			b = "(absent)"
		}
		out = append(out, fmt.Sprintf("field %s: checkpoint %s, now %s", k, a, b))
	}
	return out
}

// CheckConfigCompatible is the config half of a resume: a
// GraphConst value bakes into the compiled programs, so any difference refuses, naming each field
// with both values; Device and Host values are program inputs or host-only, so their differences
// are allowed and returned as notes for the caller to report.
func CheckConfigCompatible(path string, was, now Values) (notes []string, err error) {
	if diffs := DiffValues(was.GraphConst, now.GraphConst); len(diffs) > 0 {
		return nil, fmt.Errorf("resume from %s refused: GraphConst fields differ from the checkpoint's, and a GraphConst field bakes into the compiled programs, so the resumed run would train a different program:\n  %s\nset them back to the checkpoint's values, or start a new run (another run dir; core.WithCheckpoint / --checkpoint starts from the weights alone)",
			path, strings.Join(diffs, "\n  "))
	}
	for _, d := range DiffValues(was.Device, now.Device) {
		notes = append(notes, "Device "+d)
	}
	for _, d := range DiffValues(was.Host, now.Host) {
		notes = append(notes, "Host "+d)
	}
	return notes, nil
}
