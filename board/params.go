package board

import (
	"sort"
	"strings"
)

// knob is a config field's name with case and underscores dropped: core logs each resolved knob
// in snake_case (max_epochs) beside the experiment's struct field of the same knob (MaxEpochs),
// so both spellings land on one knob.
func knob(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}

// preferred reports whether spelling a wins over b for one knob: the lower-case one (core's
// resolved value, after run options such as --max-epochs) over the struct field (what the
// experiment asked for before a run option overrode it), then the first by name.
func preferred(a, b string) bool {
	la, lb := a == strings.ToLower(a), b == strings.ToLower(b)
	if la != lb {
		return la
	}
	return a < b
}

// collapse keeps one value per knob of a params map (see preferred), and notes each dropped
// spelling whose value differs from the kept one, so the page can say what was overridden.
func collapse(params map[string]string) (kept, overridden map[string]string) {
	winner := map[string]string{}
	for k := range params {
		if w, ok := winner[knob(k)]; !ok || preferred(k, w) {
			winner[knob(k)] = k
		}
	}
	kept, overridden = map[string]string{}, map[string]string{}
	for k, v := range params {
		w := winner[knob(k)]
		if k == w {
			kept[k] = v
		} else if v != params[w] {
			overridden[w] = joinNote(overridden[w], k+" "+v)
		}
	}
	return kept, overridden
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

// field is one row of the config table: a knob and the spelling shown for it.
type field struct{ knob, name string }

// diff is the config rows whose values differ between the runs (a field a run lacks differs),
// and how many agree. Rows are knobs, so one run's MaxEpochs and another's max_epochs share a
// row. run_dir is left out: every run differs there, and the table names the dirs.
func diff(runs []Run) (differ []field, same int) {
	for _, f := range fields(runs) {
		if f.knob == knob("run_dir") {
			continue
		}
		v0, _, ok0 := value(runs[0], f)
		agree := true
		for _, r := range runs[1:] {
			if v, _, ok := value(r, f); ok != ok0 || v != v0 {
				agree = false
				break
			}
		}
		if agree {
			same++
		} else {
			differ = append(differ, f)
		}
	}
	return differ, same
}

// fields is every knob the runs logged, by shown name, each under its preferred spelling.
func fields(runs []Run) []field {
	name := map[string]string{}
	for _, r := range runs {
		for k := range r.Params {
			if n, ok := name[knob(k)]; !ok || preferred(k, n) {
				name[knob(k)] = k
			}
		}
	}
	out := make([]field, 0, len(name))
	for k, n := range name {
		out = append(out, field{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// value is run's value for f under whichever spelling the run logged it, and that spelling.
func value(r Run, f field) (v, spelling string, ok bool) {
	if v, ok := r.Params[f.name]; ok {
		return v, f.name, true
	}
	for k, v := range r.Params {
		if knob(k) == f.knob {
			return v, k, true
		}
	}
	return "", "", false
}
