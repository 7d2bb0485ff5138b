package checkpoint

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Ext is the extension of a checkpoint file.
const Ext = ".safetensors"

// NameArgs is what a checkpoint's filename may depend on. Score is meaningful only when
// Scored; it is then finite.
type NameArgs struct {
	Epoch  int
	Step   int
	Metric string
	Score  float64
	Scored bool
}

// NameFunc names a checkpoint file (a base name, no directory).
type NameFunc func(NameArgs) string

var _ NameFunc = Filename

// Filename is the default name: epoch zero-padded to 4 digits first (so lexicographic order is
// training order), step unpadded, then "-metric=score" only when scored, the score as %g with
// 6 significant digits and the metric name sanitized to [A-Za-z0-9_.-]:
//
//	epoch-0006-step-4500-val_loss=0.0416831.safetensors
//	epoch-0006-step-4500.safetensors
func Filename(a NameArgs) string {
	s := fmt.Sprintf("epoch-%04d-step-%d", a.Epoch, a.Step)
	if a.Scored {
		s += "-" + SanitizeMetric(a.Metric) + "=" + strconv.FormatFloat(a.Score, 'g', 6, 64)
	}
	return s + Ext
}

// SanitizeMetric makes a metric name safe in a filename: every character outside
// [A-Za-z0-9_.-] becomes '_'; an empty name becomes "metric".
func SanitizeMetric(name string) string {
	if name == "" {
		return "metric"
	}
	var b strings.Builder
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ParseFilename reads back a name Filename wrote; the score comes back rounded to 6 digits.
func ParseFilename(base string) (NameArgs, error) {
	bad := func(why string) (NameArgs, error) {
		return NameArgs{}, fmt.Errorf("checkpoint: filename %q: %s", base, why)
	}
	s, ok := strings.CutSuffix(base, Ext)
	if !ok {
		return bad("no " + Ext + " extension")
	}
	s, ok = strings.CutPrefix(s, "epoch-")
	if !ok {
		return bad(`does not start with "epoch-"`)
	}
	ep, s, ok := strings.Cut(s, "-step-")
	if !ok || len(ep) < 4 {
		return bad(`want "epoch-NNNN-step-N"`)
	}
	var a NameArgs
	var err error
	if a.Epoch, err = digits(ep); err != nil {
		return bad("epoch: " + err.Error())
	}
	st, rest, scored := strings.Cut(s, "-")
	if a.Step, err = digits(st); err != nil {
		return bad("step: " + err.Error())
	}
	if !scored {
		return a, nil
	}
	i := strings.LastIndexByte(rest, '=')
	if i <= 0 {
		return bad(`want "-metric=score" after the step`)
	}
	a.Metric, a.Scored = rest[:i], true
	if SanitizeMetric(a.Metric) != a.Metric {
		return bad("metric name has characters outside [A-Za-z0-9_.-]")
	}
	if a.Score, err = strconv.ParseFloat(rest[i+1:], 64); err != nil || math.IsNaN(a.Score) || math.IsInf(a.Score, 0) {
		return bad("score is not a finite number")
	}
	return a, nil
}

func digits(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	return strconv.Atoi(s)
}

// validBase checks that a NameFunc's answer is a plain file name this package may own.
func validBase(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return fmt.Errorf("checkpoint: filename %q is not a file name", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("checkpoint: filename %q must be a base name, without a directory", name)
	case IsTemp(name):
		return fmt.Errorf("checkpoint: filename %q uses the temporary-file prefix %q", name, tmpPrefix)
	case name == ManifestName:
		return fmt.Errorf("checkpoint: filename %q is the manifest's", name)
	}
	return nil
}
