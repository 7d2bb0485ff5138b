package schedules

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parsed is a schedule written as text: the Factory Parse built and the text it came from. A
// schedule map takes it as a value like a Factory; String gives the text back, which is what a
// run's params line and binding report can show (a Factory is a Go func, with no text of its own).
type Parsed struct {
	Text    string
	Factory Factory
}

// String is the text the schedule was parsed from.
func (p Parsed) String() string { return p.Text }

// form is one accepted text form: its name, its arguments' names (an int one is a step count),
// and the Factory they build.
type form struct {
	name  string
	args  []string
	ints  map[int]bool // argument positions that are whole numbers of optimizer steps
	build func(a []float64) Factory
}

// forms are the text forms, one per shipped factory, in the order the help lists them.
var forms = []form{
	{name: "constant", args: []string{"value"}, build: func(a []float64) Factory { return Constant(a[0]) }},
	{name: "linear", args: []string{"from", "to"}, build: func(a []float64) Factory { return Linear(a[0], a[1]) }},
	{name: "cosine", args: []string{"peak", "floor"}, build: func(a []float64) Factory { return Cosine(a[0], a[1]) }},
	{name: "warmup_cosine", args: []string{"warmup_frac", "peak", "floor"}, build: func(a []float64) Factory { return WarmupCosine(a[0], a[1], a[2]) }},
	{name: "warmup_cosine_steps", args: []string{"warmup_steps", "peak", "floor"}, ints: map[int]bool{0: true},
		build: func(a []float64) Factory { return WarmupCosineSteps(int(a[0]), a[1], a[2]) }},
	{name: "step_decay", args: []string{"initial", "factor", "every"}, ints: map[int]bool{2: true},
		build: func(a []float64) Factory { return StepDecay(a[0], a[1], int(a[2])) }},
}

// Forms lists the accepted text forms, one per line, as a flag's help or an error shows them.
func Forms() string {
	var b strings.Builder
	b.WriteString("  <number>  (a constant)\n")
	for _, f := range forms {
		fmt.Fprintf(&b, "  %s:%s\n", f.name, strings.Join(f.args, ","))
	}
	b.WriteString("  piecewise:value,step,value[,step,value...]  (value until step, then the next)\n")
	return b.String()
}

// Parse reads a schedule written as text: a number (a constant), or name:arguments with the
// arguments comma-separated, one form per shipped factory (Forms lists them):
//
//	0.001                           Constant(0.001)
//	cosine:0.05,0                   Cosine(0.05, 0)
//	warmup_cosine:0.1,0.05,0        WarmupCosine(0.1, 0.05, 0)
//	piecewise:0.1,100,0.01,200,0.001  0.1 until step 100, 0.01 until 200, then 0.001
//
// Every argument must be a finite number, and a step count a whole one; the factory's own
// checks (a warmup shorter than the run, increasing boundaries) run when Resolve builds it, and
// are reported there naming the key. The error names the text and the fix.
func Parse(text string) (Parsed, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return Parsed{}, fmt.Errorf("schedule %q is empty: write a number or one of\n%s", text, strings.TrimSuffix(Forms(), "\n"))
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		v, err := finite(s)
		if err != nil {
			return Parsed{}, fmt.Errorf("schedule %q %v: a schedule's values must be finite", text, err)
		}
		return Parsed{Text: s, Factory: Constant(v)}, nil
	}
	name, rest, ok := strings.Cut(s, ":")
	name = strings.ToLower(strings.TrimSpace(name))
	if !ok {
		return Parsed{}, fmt.Errorf("schedule %q is neither a number nor name:arguments: write one of\n%s", text, strings.TrimSuffix(Forms(), "\n"))
	}
	var args []float64
	for i, a := range strings.Split(rest, ",") {
		v, err := finite(a)
		if err != nil {
			return Parsed{}, fmt.Errorf("schedule %q: argument %d (%q) %v", text, i+1, strings.TrimSpace(a), err)
		}
		args = append(args, v)
	}
	if name == "piecewise" {
		f, err := parsePiecewise(text, args)
		return Parsed{Text: s, Factory: f}, err
	}
	for _, f := range forms {
		if f.name != name {
			continue
		}
		if len(args) != len(f.args) {
			return Parsed{}, fmt.Errorf("schedule %q: %s takes %d arguments (%s), got %d", text, name, len(f.args), strings.Join(f.args, ","), len(args))
		}
		for i := range args {
			if f.ints[i] && (args[i] != math.Trunc(args[i]) || math.Abs(args[i]) > math.MaxInt32) {
				return Parsed{}, fmt.Errorf("schedule %q: %s is a number of optimizer steps, so a whole number, not %v", text, f.args[i], args[i])
			}
		}
		return Parsed{Text: s, Factory: f.build(args)}, nil
	}
	return Parsed{}, fmt.Errorf("schedule %q: unknown form %q: write a number or one of\n%s", text, name, strings.TrimSuffix(Forms(), "\n"))
}

// parsePiecewise reads value,step,value,...: an odd count, the steps whole numbers.
func parsePiecewise(text string, args []float64) (Factory, error) {
	if len(args)%2 == 0 {
		return nil, fmt.Errorf("schedule %q: piecewise alternates value,step,value and ends with a value (an odd count), got %d arguments", text, len(args))
	}
	var bounds []int
	var values []float64
	for i, a := range args {
		if i%2 == 0 {
			values = append(values, a)
			continue
		}
		if a != math.Trunc(a) || a < 1 || a > math.MaxInt32 {
			return nil, fmt.Errorf("schedule %q: piecewise argument %d (%v) is a step, so a whole number >= 1", text, i+1, a)
		}
		bounds = append(bounds, int(a))
	}
	return Piecewise(bounds, values), nil
}

// finite parses one number, refusing NaN and infinities, which no schedule may return.
func finite(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("is not a number")
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("is not finite")
	}
	return v, nil
}
