package engine

import (
	"sync"

	"github.com/nitro-go/nitro/pjrthook"
)

// Input/output aliasing. The training programs replace what they are given: new parameters, new
// optimizer state and new layer state come out where the donated old ones went in. A program
// built here names, per output, the input it replaces (outList.replacing), and compileProgram
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
