package engine

import (
	"sync"

	"github.com/nitro-go/nitro/pjrthook"
)

// Input/output aliasing. The training programs replace what they are given: new parameters, new
// optimizer state and new layer state come out where the donated old ones went in. A program
// built here lists, per output, the input it replaces (program.replaces), and compileProgram
// declares those pairs to the interposer (pjrthook.DeclareAliases) under the program's module
// name just before it compiles, so XLA writes each such output into its donated input's buffer
// instead of allocating a fresh one every step. Only the module names of training programs are
// declared; eval and predict (what a bundle exports) compile as traced. On the pure-Go backend
// nothing reads the declarations.

// aliasMu keeps one engine's declaration and its compile together: two engines building the same
// kind at once would otherwise race for the name's declaration. Aliasing never changes a value,
// so a mix-up could only cost the aliasing, but the lock makes each compile get its own pairs.
var aliasMu sync.Mutex

// aliasPairs turns replaces (per output, the name of the input it replaces, "" for none) into
// the interposer's pairs over sig's positions.
func aliasPairs(sig signature, replaces []string) []pjrthook.Alias {
	at := make(map[string]int, len(sig))
	for i, in := range sig {
		at[in.Name] = i
	}
	var pairs []pjrthook.Alias
	for out, name := range replaces {
		if i, ok := at[name]; ok && name != "" {
			pairs = append(pairs, pjrthook.Alias{Input: i, Output: out})
		}
	}
	return pairs
}

// updateReplaces is what the optimizer's outputs replace, in emitUpdates' order: every group's
// parameter segments, then every group's non-constant state segments ("" for each when state is
// false).
func (e *Engine) updateReplaces(state bool) []string {
	var names []string
	for _, g := range e.groups {
		for s := range g.segs {
			names = append(names, paramsInput(g, s))
		}
	}
	for i, g := range e.groups {
		for l := range e.st.groups[i].opt {
			if g.constLeaf(l) {
				continue
			}
			for s := range g.segs {
				if state {
					names = append(names, stateInput(l)(g, s))
				} else {
					names = append(names, "")
				}
			}
		}
	}
	return names
}

// layerReplaces is what the new layer state replaces: the old, in stateVars order.
func (e *Engine) layerReplaces() []string {
	names := make([]string, len(e.stateVars))
	for i, v := range e.stateVars {
		names[i] = "state/" + v.ScopeAndName()
	}
	return names
}

// stepReplaces is the fused and manual step's: only the layer state (the loss, the parameters,
// the optimizer state and the metrics replace nothing). In one program the backward pass reads
// the old parameters, and XLA may schedule that read after the update: an aliased parameter
// segment is then copied whole into a temporary first (the CNN's f32[802816] dense segment, the
// MLP's f32[262144], every step), and the CNN's fused step took about 20% more XLA time than
// without aliasing. The optimizer state was copied likewise. The two-program optimizer program
// reads each input only in its update and aliases them all with no copy.
func (e *Engine) stepReplaces() []string {
	return append(append([]string{""}, make([]string, len(e.updateReplaces(false)))...), e.layerReplaces()...)
}

// gradientReplaces is the gradient program's: the loss, each segment's gradient (replacing the
// running sum when accum > 1), the layer state.
func (e *Engine) gradientReplaces() []string {
	names := []string{""}
	for _, g := range e.groups {
		for s := range g.segs {
			if e.accum > 1 {
				names = append(names, accInput(g, s))
			} else {
				names = append(names, "")
			}
		}
	}
	return append(names, e.layerReplaces()...)
}
