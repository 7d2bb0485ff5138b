package core

import (
	"fmt"
	"strings"

	"github.com/nitro-go/nitro/markers"
)

// checkDefaults refuses an experiment whose `default:` tags (or Default method) were never
// applied: a struct literal such as &E{} holds zeros where E declares other values, and training
// it fails far from the cause (an empty parameter group, a zero learning rate). Filling the zeros
// in here would be wrong the other way: a field set to zero on purpose looks exactly like one
// never set, and would be overridden silently. markers.New tells the two apart (it applies the
// defaults, then the overrides, and remembers what it built), so the fix is to build with it.
func checkDefaults(e any) error {
	if markers.Built(e) {
		return nil
	}
	unset, err := markers.UnappliedDefaults(e)
	if err != nil || len(unset) == 0 {
		return err
	}
	tr, err := markers.TraitsOf(e)
	if err != nil {
		return err
	}
	desc := make([]string, len(unset))
	for i, name := range unset {
		f, _ := tr.Field(name)
		desc[i] = fmt.Sprintf("%s (default %v)", name, f.Default)
	}
	return fmt.Errorf("core.New: %s declares defaults that were never applied: %s, each holding its zero value; "+
		"build the experiment with markers.New[%s](overrides) or markers.FromPreset, which apply the "+
		"`default:` tags, and pass the pointer it returns; to run with a zero on purpose, give it as an "+
		"override: markers.New[%s](map[string]any{%q: 0})",
		tr.Name, strings.Join(desc, ", "), tr.Name, tr.Name, unset[0])
}
