package compilecache

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Program kinds. The gradient kind keys on Accum, the optimizer kind on Clip, and the fused train
// step (gradient and optimizer update in one program, accum 1 only) on both.
const (
	KindGradient  = "gradient"
	KindOptimizer = "optimizer"
	KindTrainStep = "train_step"
	KindEval      = "eval"
	KindPredict   = "predict"
)

// KindMetric is the kind of a device-residency metric hook's program: one program per hook.
func KindMetric(hook string) string { return "metric:" + hook }

// Input is one positional argument of a program: its name (for explanations), dtype and shape.
type Input struct {
	Name  string
	DType string
	Shape []int
}

// Key identifies a compiled program. Every field except GraphConst enters the identity; GraphConst holds
// the (field name, printed value) pairs behind GraphConstHash so a miss can name the field that moved.
type Key struct {
	Kind           string
	Experiment     string
	GraphConstHash string
	GraphConst     [][2]string
	Hook           string
	Inputs         []Input
	DeviceCount    int
	Accum          int     // gradient program: >= 1; fused train step: 1; 0 elsewhere
	Clip           float64 // optimizer program and fused train step: global-norm threshold, 0 = off
	Extra          [][2]string
}

// validate rejects keys that would silently share or split entries: a kind-specific component on the
// wrong kind would make e.g. a clip change miss the gradient program.
func (k Key) validate() error {
	if k.Kind == "" {
		return fmt.Errorf("compile cache key: Kind is empty: set it to %q, %q, %q, %q or %q", KindGradient, KindOptimizer, KindEval, KindPredict, KindMetric("<hook>"))
	}
	if k.Experiment == "" {
		return fmt.Errorf("compile cache key for %s program: Experiment is empty: set it to the experiment's type name", k.Kind)
	}
	if k.DeviceCount < 1 {
		return fmt.Errorf("compile cache key for %s program: DeviceCount %d: set it to the number of devices the program runs on (>= 1)", k.Kind, k.DeviceCount)
	}
	switch k.Kind {
	case KindGradient:
		if k.Accum < 1 {
			return fmt.Errorf("compile cache key for gradient program: Accum %d: set it to the accumulation count (>= 1)", k.Accum)
		}
	case KindTrainStep:
		if k.Accum != 1 {
			return fmt.Errorf("compile cache key for train_step program: Accum %d: a fused train step exists only at accum 1; set Accum to 1", k.Accum)
		}
	default:
		if k.Accum != 0 {
			return fmt.Errorf("compile cache key for %s program: Accum %d set: accum belongs to the gradient program's key only (leave it 0 so changing accum does not recompile this program)", k.Kind, k.Accum)
		}
	}
	if k.Kind == KindOptimizer || k.Kind == KindTrainStep {
		if k.Clip < 0 || math.IsNaN(k.Clip) || math.IsInf(k.Clip, 0) {
			return fmt.Errorf("compile cache key for %s program: Clip %v: set a finite threshold >= 0 (0 = no clipping)", k.Kind, k.Clip)
		}
	} else if k.Clip != 0 {
		return fmt.Errorf("compile cache key for %s program: Clip %v set: the clip threshold belongs to the optimizer program's key only (leave it 0 so changing it does not recompile this program)", k.Kind, k.Clip)
	}
	seen := map[string]bool{}
	for i, in := range k.Inputs {
		if in.Name == "" {
			return fmt.Errorf("compile cache key for %s program: input %d has no Name: name every input so a miss can say which one moved", k.Kind, i)
		}
		if seen[in.Name] {
			return fmt.Errorf("compile cache key for %s program: input %s appears twice: give each input a distinct Name", k.Kind, in.Name)
		}
		seen[in.Name] = true
	}
	if err := uniqueNames(k.GraphConst, "GraphConst field"); err != nil {
		return fmt.Errorf("compile cache key for %s program: %w", k.Kind, err)
	}
	if err := uniqueNames(k.Extra, "Extra component"); err != nil {
		return fmt.Errorf("compile cache key for %s program: %w", k.Kind, err)
	}
	return nil
}

func uniqueNames(pairs [][2]string, what string) error {
	seen := map[string]bool{}
	for _, p := range pairs {
		if seen[p[0]] {
			return fmt.Errorf("%s %s appears twice: give each a distinct name", what, p[0])
		}
		seen[p[0]] = true
	}
	return nil
}

// identity is the canonical text of the key's identity. Every string is quoted so that no two different
// keys print alike; GraphConst pairs are left out because the hash is the identity.
func (k Key) identity() string {
	var b strings.Builder
	q := func(s string) { b.WriteString(strconv.Quote(s)) }
	b.WriteString("kind=")
	q(k.Kind)
	b.WriteString(" exp=")
	q(k.Experiment)
	b.WriteString(" gc=")
	q(k.GraphConstHash)
	b.WriteString(" hook=")
	q(k.Hook)
	b.WriteString(" inputs=[")
	for _, in := range k.Inputs {
		q(in.Name)
		b.WriteByte(':')
		q(in.DType)
		fmt.Fprint(&b, in.Shape)
		b.WriteByte(',')
	}
	b.WriteString("] devices=")
	b.WriteString(strconv.Itoa(k.DeviceCount))
	b.WriteString(" accum=")
	b.WriteString(strconv.Itoa(k.Accum))
	b.WriteString(" clip=")
	b.WriteString(formatFloat(k.Clip))
	b.WriteString(" extra=[")
	for _, p := range k.Extra {
		q(p[0])
		b.WriteByte('=')
		q(p[1])
		b.WriteByte(',')
	}
	b.WriteString("]")
	return b.String()
}

// clone copies the slices so a caller reusing its Key after Get cannot rewrite a stored entry.
func (k Key) clone() Key {
	c := k
	c.GraphConst = append([][2]string(nil), k.GraphConst...)
	c.Extra = append([][2]string(nil), k.Extra...)
	c.Inputs = make([]Input, len(k.Inputs))
	for i, in := range k.Inputs {
		in.Shape = append([]int(nil), in.Shape...)
		c.Inputs[i] = in
	}
	return c
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

const absent = "(absent)"

// diff lists the components that moved from old to new, in key order, in the texts Lookup.Why carries.
func diff(old, new Key) []string {
	var out []string
	if old.GraphConstHash != new.GraphConstHash {
		named := diffPairs(old.GraphConst, new.GraphConst, "graphconst field ")
		if len(named) == 0 {
			// The pairs do not show the change (not supplied, or printed alike): the hash is all there is.
			named = []string{fmt.Sprintf("graphconst hash: %s -> %s", old.GraphConstHash, new.GraphConstHash)}
		}
		out = append(out, named...)
	}
	if old.Hook != new.Hook {
		out = append(out, fmt.Sprintf("hook: %s -> %s", old.Hook, new.Hook))
	}
	out = append(out, diffInputs(old.Inputs, new.Inputs)...)
	if old.DeviceCount != new.DeviceCount {
		out = append(out, fmt.Sprintf("device count: %d -> %d", old.DeviceCount, new.DeviceCount))
	}
	if old.Accum != new.Accum {
		out = append(out, fmt.Sprintf("accum: %d -> %d", old.Accum, new.Accum))
	}
	if old.Clip != new.Clip {
		out = append(out, fmt.Sprintf("clip: %s -> %s", formatFloat(old.Clip), formatFloat(new.Clip)))
	}
	out = append(out, diffPairs(old.Extra, new.Extra, "")...)
	return out
}

// diffPairs compares name/value lists by name: changed values in new's order, then removed names.
func diffPairs(old, new [][2]string, prefix string) []string {
	oldByName := map[string]string{}
	for _, p := range old {
		oldByName[p[0]] = p[1]
	}
	newNames := map[string]bool{}
	var out []string
	for _, p := range new {
		newNames[p[0]] = true
		was, ok := oldByName[p[0]]
		if !ok {
			was = absent
		}
		if !ok || was != p[1] {
			out = append(out, fmt.Sprintf("%s%s: %s -> %s", prefix, p[0], was, p[1]))
		}
	}
	for _, p := range old {
		if !newNames[p[0]] {
			out = append(out, fmt.Sprintf("%s%s: %s -> %s", prefix, p[0], p[1], absent))
		}
	}
	return out
}

func diffInputs(old, new []Input) []string {
	oldByName := map[string]Input{}
	for _, in := range old {
		oldByName[in.Name] = in
	}
	newNames := map[string]bool{}
	var out []string
	for _, in := range new {
		newNames[in.Name] = true
		was, ok := oldByName[in.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("input %s: %s -> %s", in.Name, absent, typed(in)))
		case was.DType != in.DType:
			out = append(out, fmt.Sprintf("input %s: %s -> %s", in.Name, typed(was), typed(in)))
		case !slices.Equal(was.Shape, in.Shape):
			out = append(out, fmt.Sprintf("input %s: %v -> %v", in.Name, was.Shape, in.Shape))
		}
	}
	for _, in := range old {
		if !newNames[in.Name] {
			out = append(out, fmt.Sprintf("input %s: %s -> %s", in.Name, typed(in), absent))
		}
	}
	if len(out) == 0 && !sameOrder(old, new) {
		out = append(out, fmt.Sprintf("input order: %v -> %v", inputNames(old), inputNames(new)))
	}
	return out
}

func typed(in Input) string { return fmt.Sprintf("%s%v", in.DType, in.Shape) }

func sameOrder(a, b []Input) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

func inputNames(ins []Input) []string {
	names := make([]string, len(ins))
	for i, in := range ins {
		names[i] = in.Name
	}
	return names
}
