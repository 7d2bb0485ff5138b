package sweep

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// kinds lists the distributions in the order errors name them.
var kinds = []Kind{Uniform, LogUniform, Int, Choice}

// maxInt is the largest magnitude an Int bound may have: beyond 2^53 a float64 no longer holds
// every integer, so a sampled value could not be told apart from its neighbour.
const maxInt = 1 << 53

// ParseParam reads one --param flag, "Name=kind:args":
//
//	LearningRate=loguniform:1e-4,1e-2
//	Dropout=uniform:0,0.5
//	Layers=int:1,4
//	Act=choice:relu,gelu
//
// Spaces around the name, the kind and each argument are dropped. A choice's values are text
// (anything without a comma), kept as written, so the field parses them as it would any --set.
func ParseParam(s string) (Param, error) {
	fail := func(format string, a ...any) (Param, error) {
		return Param{}, fmt.Errorf("--param %q: %s", s, fmt.Sprintf(format, a...))
	}
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return fail("no '=': write Name=kind:args, e.g. LearningRate=loguniform:1e-4,1e-2")
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return fail("the name before '=' is empty: write the experiment's field, e.g. Dropout=uniform:0,0.5")
	}
	kindText, argText, ok := strings.Cut(rest, ":")
	if !ok {
		return fail("%s: no ':' after the kind: write %s=kind:args with kind one of %s", name, name, kindList())
	}
	kind := Kind(strings.TrimSpace(kindText))
	args := strings.Split(argText, ",")
	for i := range args {
		args[i] = strings.TrimSpace(args[i])
	}
	p := Param{Name: name, Kind: kind}
	switch kind {
	case Uniform, LogUniform, Int:
		if len(args) != 2 {
			return fail("%s: %s takes two numbers, low,high (got %d values)", name, kind, len(args))
		}
		var bounds [2]float64
		for i, a := range args {
			v, err := strconv.ParseFloat(a, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fail("%s: %s bound %q is not a finite number: write two numbers, e.g. %s=%s:%s",
					name, kind, a, name, kind, example(kind))
			}
			bounds[i] = v
		}
		p.Low, p.High = bounds[0], bounds[1]
	case Choice:
		p.Choices = args
	default:
		return fail("%s: unknown kind %q: use one of %s", name, kind, kindList())
	}
	if err := p.check(); err != nil {
		return fail("%v", err)
	}
	return p, nil
}

func kindList() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func example(k Kind) string {
	switch k {
	case LogUniform:
		return "1e-4,1e-2"
	case Int:
		return "1,4"
	case Choice:
		return "64,128,256"
	}
	return "0,0.5"
}

// check says what is wrong with p, naming it; ParseParam and Space.Check add where p came from.
func (p Param) check() error {
	if strings.TrimSpace(p.Name) == "" {
		return errors.New("a parameter has an empty name: give the experiment's field it sets")
	}
	if p.Name != strings.TrimSpace(p.Name) || strings.ContainsAny(p.Name, "=") {
		return fmt.Errorf("%q: a name may not contain '=' or start or end with a space: use the field's name as --set writes it", p.Name)
	}
	switch p.Kind {
	case Uniform, LogUniform, Int:
		if len(p.Choices) != 0 {
			return fmt.Errorf("%s: %s takes low,high, not choices: drop the choices or make it choice:", p.Name, p.Kind)
		}
		for _, v := range []float64{p.Low, p.High} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: %s bounds must be finite numbers (got %v)", p.Name, p.Kind, v)
			}
		}
		if p.Low > p.High {
			return fmt.Errorf("%s: %s needs low <= high (got low %s > high %s): swap them",
				p.Name, p.Kind, formatFloat(p.Low), formatFloat(p.High))
		}
		if p.Kind == LogUniform && p.Low <= 0 {
			return fmt.Errorf("%s: loguniform needs 0 < low <= high (got low %s): use a positive low, or uniform: for a range that includes 0",
				p.Name, formatFloat(p.Low))
		}
		if p.Kind == Int {
			for _, v := range []float64{p.Low, p.High} {
				if v != math.Trunc(v) {
					return fmt.Errorf("%s: int bounds must be integers (got %s): write e.g. %s=int:1,4, or uniform: for a float",
						p.Name, formatFloat(v), p.Name)
				}
				if math.Abs(v) > maxInt {
					return fmt.Errorf("%s: int bound %s is beyond ±2^53, where a float64 skips integers: use a smaller range",
						p.Name, formatFloat(v))
				}
			}
		}
	case Choice:
		if len(p.Choices) == 0 {
			return fmt.Errorf("%s: choice needs at least one value: write e.g. %s=choice:64,128,256", p.Name, p.Name)
		}
		seen := make(map[string]bool, len(p.Choices))
		for i, c := range p.Choices {
			if c == "" {
				return fmt.Errorf("%s: choice value %d is empty: drop the extra comma", p.Name, i+1)
			}
			if c != strings.TrimSpace(c) || strings.Contains(c, ",") {
				return fmt.Errorf("%s: choice value %q may not contain a comma or start or end with a space: one value per comma-separated item", p.Name, c)
			}
			if seen[c] {
				return fmt.Errorf("%s: choice value %q is given twice: list each value once", p.Name, c)
			}
			seen[c] = true
		}
	default:
		return fmt.Errorf("%s: unknown kind %q: use one of %s", p.Name, p.Kind, kindList())
	}
	return nil
}

// String gives the text ParseParam reads back to p.
func (p Param) String() string {
	return p.Name + "=" + p.distribution()
}

// distribution is p without its name, "kind:args", as Diff shows a change.
func (p Param) distribution() string {
	switch p.Kind {
	case Choice:
		return string(p.Kind) + ":" + strings.Join(p.Choices, ",")
	case Int:
		return string(p.Kind) + ":" + formatInt(p.Low) + "," + formatInt(p.High)
	}
	return string(p.Kind) + ":" + formatFloat(p.Low) + "," + formatFloat(p.High)
}

// formatFloat is the shortest text that parses back to v exactly, so a value given to --set is
// the value the record holds.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func formatInt(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) <= maxInt {
		return strconv.FormatInt(int64(v), 10)
	}
	return formatFloat(v)
}

// equal says whether p and o are the same distribution over the same field; a Choice's Low and
// High, and an Int's float spelling, do not matter.
func (p Param) equal(o Param) bool {
	if p.Name != o.Name || p.Kind != o.Kind {
		return false
	}
	if p.Kind == Choice {
		if len(p.Choices) != len(o.Choices) {
			return false
		}
		for i := range p.Choices {
			if p.Choices[i] != o.Choices[i] {
				return false
			}
		}
		return true
	}
	return p.Low == o.Low && p.High == o.High
}

// Check says whether s is a valid search space: at least one parameter, each valid, no name
// given twice.
func (s Space) Check() error {
	if len(s) == 0 {
		return errors.New("search space is empty: give at least one --param Name=kind:args")
	}
	seen := make(map[string]bool, len(s))
	for _, p := range s {
		if err := p.check(); err != nil {
			return fmt.Errorf("search space: %w", err)
		}
		if seen[p.Name] {
			return fmt.Errorf("search space: %s is given twice: give each field one --param", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// Diff compares s (the recorded space) with o (the one asked for now) and returns "" when they
// are the same, else one sentence naming every difference: a changed parameter with its old and
// new distribution, each added and removed one, and a changed order (the order decides a grid's
// trials and the --set order).
func (s Space) Diff(o Space) string {
	old := make(map[string]Param, len(s))
	for _, p := range s {
		old[p.Name] = p
	}
	now := make(map[string]Param, len(o))
	for _, p := range o {
		now[p.Name] = p
	}
	var diffs []string
	for _, p := range o {
		q, ok := old[p.Name]
		switch {
		case !ok:
			diffs = append(diffs, p.Name+" added")
		case !q.equal(p):
			diffs = append(diffs, fmt.Sprintf("%s was %s, now %s", p.Name, q.distribution(), p.distribution()))
		}
	}
	for _, p := range s {
		if _, ok := now[p.Name]; !ok {
			diffs = append(diffs, p.Name+" removed")
		}
	}
	if len(diffs) == 0 {
		// Same parameters; only their order can differ.
		var a, b []string
		for _, p := range s {
			a = append(a, p.Name)
		}
		for _, p := range o {
			b = append(b, p.Name)
		}
		if x, y := strings.Join(a, ", "), strings.Join(b, ", "); x != y {
			diffs = append(diffs, fmt.Sprintf("the order was %s, now %s", x, y))
		}
	}
	return strings.Join(diffs, "; ")
}

// Sets gives params as "Name=value" in s's order, the form --set takes: a float as the shortest
// text that parses back to it, an int as integer text, a choice as its value's text. It refuses
// values that do not fit s (see Contains).
func (s Space) Sets(params map[string]float64) ([]string, error) {
	if err := s.Contains(params); err != nil {
		return nil, err
	}
	sets := make([]string, len(s))
	for i, p := range s {
		v := params[p.Name]
		switch p.Kind {
		case Choice:
			sets[i] = p.Name + "=" + p.Choices[int(v)]
		case Int:
			sets[i] = p.Name + "=" + formatInt(v)
		default:
			sets[i] = p.Name + "=" + formatFloat(v)
		}
	}
	return sets, nil
}

// Contains says whether params (Optuna's internal form: a float, an int as a float, a choice's
// index) are one point of s: every parameter has a value in its range, and none is extra. A
// resumed sweep refuses a recorded trial that does not fit.
func (s Space) Contains(params map[string]float64) error {
	names := make(map[string]bool, len(s))
	for _, p := range s {
		names[p.Name] = true
		v, ok := params[p.Name]
		if !ok {
			return fmt.Errorf("%s has no value: every field of the search space needs one", p.Name)
		}
		if err := p.contains(v); err != nil {
			return err
		}
	}
	if len(params) != len(s) {
		var extra []string
		for n := range params {
			if !names[n] {
				extra = append(extra, n)
			}
		}
		slices.Sort(extra)
		return fmt.Errorf("%s not in the search space (%s): the values belong to another space",
			strings.Join(extra, ", "), strings.Join(spaceNames(s), ", "))
	}
	return nil
}

func (p Param) contains(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s=%v is not a finite number: it must lie in %s", p.Name, v, p.distribution())
	}
	switch p.Kind {
	case Choice:
		if v != math.Trunc(v) || v < 0 || v >= float64(len(p.Choices)) {
			return fmt.Errorf("%s: choice index %s is not one of 0..%d (%s)",
				p.Name, formatFloat(v), len(p.Choices)-1, p.distribution())
		}
		return nil
	case Int:
		if v != math.Trunc(v) {
			return fmt.Errorf("%s=%s is not an integer: %s takes integers", p.Name, formatFloat(v), p.distribution())
		}
	}
	if v < p.Low || v > p.High {
		return fmt.Errorf("%s=%s is outside %s", p.Name, formatFloat(v), p.distribution())
	}
	return nil
}

func spaceNames(s Space) []string {
	names := make([]string, len(s))
	for i, p := range s {
		names[i] = p.Name
	}
	return names
}
