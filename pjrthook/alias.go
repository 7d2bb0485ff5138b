package pjrthook

/*
#include <stdlib.h>
#include "hook.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"unsafe"
)

// The aliasing piece. GoMLX's StableHLO carries no input/output aliasing, so XLA gives every
// output a fresh buffer even when the caller donates the input that output replaces: the donated
// buffer is only freed, and each step allocates (and faults in) the same memory again. A program's
// builder knows which inputs each output replaces and declares them here by module name; this
// piece marks those @main arguments with tf.aliasing_output before the plugin (and the disk cache,
// which keys the program as compiled) sees the text, so XLA writes each output over its input.
//
// Aliasing changes where an output lives, never its value. The aliases are "may alias": an
// aliased input the caller does not donate stays intact, since the XLA CPU client then copies it
// into a fresh buffer before the program runs (integration's TestAliasingKeepsValues checks the
// input and the outputs bit for bit; a GPU client's behaviour is not checked here). A program whose @main does
// not parse as this piece expects, or whose declared pairs do not match (an index out of range,
// types or shardings that differ, an input or output named twice), compiles as it came, and is
// said once per module.

// Alias says that a program's output Output replaces its input Input (both 0-based, in @main's
// order), so XLA may write the output into the input's buffer when the caller donates it.
type Alias struct{ Input, Output int }

var (
	aliasMu     sync.Mutex
	aliasDecl   = map[string][]Alias{} // module name -> pairs
	aliasSaid   = map[string]bool{}    // modules whose refusal was said
	lastAliased Aliasing
	// aliasNotice says why a declared module compiled unaliased; nil: standard error.
	aliasNotice func(string)
)

// DeclareAliases makes every later compile of the module named module (its text starts
// "module @"+module) alias the given pairs; none removes the declaration. The last declaration of
// a name wins: builders of one name must declare the same pairs for the same signature (a stale
// declaration that still matches the types costs nothing but the aliasing; one that does not
// leaves the program unaliased).
func DeclareAliases(module string, pairs []Alias) {
	aliasMu.Lock()
	defer aliasMu.Unlock()
	if len(pairs) == 0 {
		delete(aliasDecl, module)
		return
	}
	aliasDecl[module] = slices.Clone(pairs)
}

// Aliasing is what the piece did with the last compile of a declared module: Pairs aliased
// (0 when Err says why the program compiled unchanged). Seq counts those compiles.
type Aliasing struct {
	Seq    uint64
	Module string
	Pairs  int
	Err    error
}

// LastAliasing reports the last compile of a module with declared aliases.
func LastAliasing() Aliasing {
	aliasMu.Lock()
	defer aliasMu.Unlock()
	return lastAliased
}

// moduleName is the name in a program's first line, "module @NAME ..."; "" when it has none.
func moduleName(code []byte) string {
	rest, ok := bytes.CutPrefix(code, []byte("module @"))
	if !ok {
		return ""
	}
	end := bytes.IndexAny(rest, " {\n")
	if end <= 0 || end > 256 {
		return ""
	}
	return string(rest[:end])
}

// aliasFor is the declared module's rewritten text, or nil when the module has no declaration
// or its text cannot take the pairs (then said once).
func aliasFor(code []byte) []byte {
	name := moduleName(code)
	if name == "" {
		return nil
	}
	aliasMu.Lock()
	pairs, ok := aliasDecl[name]
	aliasMu.Unlock()
	if !ok {
		return nil
	}
	out, err := addAliases(code, pairs)
	aliasMu.Lock()
	defer aliasMu.Unlock()
	lastAliased = Aliasing{Seq: lastAliased.Seq + 1, Module: name, Pairs: len(pairs), Err: err}
	if err != nil {
		lastAliased.Pairs = 0
		if !aliasSaid[name] {
			aliasSaid[name] = true
			msg := fmt.Sprintf("nitro: pjrthook: %s compiles without input/output aliasing (its outputs get fresh buffers each run): %v", name, err)
			if aliasNotice != nil {
				aliasNotice(msg)
			} else {
				fmt.Fprintln(os.Stderr, msg)
			}
		}
		return nil
	}
	return out
}

// mainItem is one argument or result of @main: its type and its attribute dictionary ("" or
// "{...}"), and where the item ends in the text.
type mainItem struct {
	typ, attrs string
	end        int // offset just past the item (before its attrs' "{" when attrs is "")
	attrsAt    int // offset of the attrs' "{", when attrs is not ""
}

// addAliases returns code with tf.aliasing_output added to @main's arguments as pairs say.
func addAliases(code []byte, pairs []Alias) ([]byte, error) {
	args, results, err := parseMain(code)
	if err != nil {
		return nil, err
	}
	usedIn, usedOut := map[int]bool{}, map[int]bool{}
	for _, p := range pairs {
		switch {
		case p.Input < 0 || p.Input >= len(args) || p.Output < 0 || p.Output >= len(results):
			return nil, fmt.Errorf("alias input %d -> output %d: @main has %d arguments and %d results", p.Input, p.Output, len(args), len(results))
		case usedIn[p.Input] || usedOut[p.Output]:
			return nil, fmt.Errorf("alias input %d -> output %d: an input or output aliased twice", p.Input, p.Output)
		case args[p.Input].typ != results[p.Output].typ:
			return nil, fmt.Errorf("alias input %d -> output %d: types %s and %s differ", p.Input, p.Output, args[p.Input].typ, results[p.Output].typ)
		case bytes.Contains([]byte(args[p.Input].attrs), []byte("aliasing_output")):
			return nil, fmt.Errorf("argument %d is already aliased", p.Input)
		case args[p.Input].attrs != results[p.Output].attrs:
			return nil, fmt.Errorf("alias input %d -> output %d: attributes %q and %q differ (a sharding must match)", p.Input, p.Output, args[p.Input].attrs, results[p.Output].attrs)
		}
		usedIn[p.Input], usedOut[p.Output] = true, true
	}
	type insert struct {
		at   int
		text string
	}
	ins := make([]insert, 0, len(pairs))
	for _, p := range pairs {
		a, attr := args[p.Input], "tf.aliasing_output = "+strconv.Itoa(p.Output)+" : i32"
		if a.attrs == "" {
			ins = append(ins, insert{a.end, " {" + attr + "}"})
		} else {
			ins = append(ins, insert{a.attrsAt + 1, attr + ","})
		}
	}
	slices.SortFunc(ins, func(x, y insert) int { return x.at - y.at })
	out := make([]byte, 0, len(code)+40*len(ins))
	last := 0
	for _, in := range ins {
		out = append(append(out, code[last:in.at]...), in.text...)
		last = in.at
	}
	return append(out, code[last:]...), nil
}

var errMainShape = errors.New("@main's signature does not parse as expected")

// parseMain reads @main's arguments ("%name: TYPE {ATTRS}") and results ("TYPE {ATTRS}", in
// parentheses) from the first "func.func @main(" of the text.
func parseMain(code []byte) (args, results []mainItem, err error) {
	head := []byte("func.func @main(")
	i := bytes.Index(code, head)
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: no %q", errMainShape, head)
	}
	p := i + len(head)
	if args, p, err = parseItems(code, p, true); err != nil {
		return nil, nil, err
	}
	arrow := []byte(" -> (")
	if !bytes.HasPrefix(code[p:], arrow) {
		return nil, nil, fmt.Errorf("%w: the results are not a parenthesized list", errMainShape)
	}
	if results, _, err = parseItems(code, p+len(arrow), false); err != nil {
		return nil, nil, err
	}
	return args, results, nil
}

// parseItems reads a ", "-separated list from p up to its closing ")", and returns the items and
// the offset just past the ")".
func parseItems(code []byte, p int, named bool) ([]mainItem, int, error) {
	var items []mainItem
	if p < len(code) && code[p] == ')' {
		return nil, p + 1, nil
	}
	for {
		start := p
		if named {
			if p >= len(code) || code[p] != '%' {
				return nil, 0, fmt.Errorf("%w: argument %d does not start with %%", errMainShape, len(items))
			}
			colon := bytes.Index(code[p:], []byte(": "))
			if colon < 0 {
				return nil, 0, fmt.Errorf("%w: argument %d has no type", errMainShape, len(items))
			}
			p += colon + 2
		}
		end, err := balanced(code, p)
		if err != nil {
			return nil, 0, err
		}
		it := mainItem{typ: string(bytes.TrimSpace(code[p:end])), end: end}
		if !bytes.HasPrefix([]byte(it.typ), []byte("tensor<")) || bytes.ContainsAny([]byte(it.typ), " {") {
			return nil, 0, fmt.Errorf("%w: item %d (%q) is not one tensor type", errMainShape, len(items), code[start:end])
		}
		p = end
		if bytes.HasPrefix(code[p:], []byte(" {")) {
			it.attrsAt = p + 1
			if p, err = balanced(code, p+1); err != nil {
				return nil, 0, err
			}
			it.attrs = string(code[it.attrsAt:p])
		}
		items = append(items, it)
		switch {
		case bytes.HasPrefix(code[p:], []byte(", ")):
			p += 2
		case p < len(code) && code[p] == ')':
			return items, p + 1, nil
		default:
			return nil, 0, fmt.Errorf("%w: unexpected text after item %d", errMainShape, len(items)-1)
		}
	}
}

// balanced returns the offset where the text from p stops being one item: the first top-level
// ",", ")" or " {" (a type ends there), or, when p starts a "{", just past its matching "}".
// Brackets of every kind nest; quoted strings are skipped whole.
func balanced(code []byte, p int) (int, error) {
	var stack []byte
	closing := map[byte]byte{'(': ')', '<': '>', '[': ']', '{': '}'}
	for i := p; i < len(code) && i-p < 1<<16; i++ {
		c := code[i]
		if len(stack) == 0 {
			if i > p && (c == ',' || c == ')' || (c == ' ' && i+1 < len(code) && code[i+1] == '{')) {
				return i, nil
			}
			if c == '\n' {
				break
			}
		}
		switch {
		case c == '"':
			j := i + 1
			for j < len(code) && code[j] != '"' && code[j] != '\n' {
				if code[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(code) || code[j] != '"' {
				return 0, fmt.Errorf("%w: an unterminated string", errMainShape)
			}
			i = j
		case c == '-' && i+1 < len(code) && code[i+1] == '>':
			i++ // an arrow, not a closing bracket
		case closing[c] != 0:
			stack = append(stack, closing[c])
		case c == ')' || c == '>' || c == ']' || c == '}':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return 0, fmt.Errorf("%w: unbalanced %q", errMainShape, c)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 && code[p] == '{' {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: an item runs past its line", errMainShape)
}

// applyAliases hands the plugin the declared module's aliased text for this call, and returns
// what puts the caller's program back (the caller's PJRT_Program is never written to).
func (c *cgoCall) applyAliases() (restore func()) {
	p := c.args.program
	if p == nil || p.format_size != 4 || C.GoStringN(p.format, 4) != "mlir" || p.code_size < 8 {
		return func() {}
	}
	name := moduleName(C.GoBytes(unsafe.Pointer(p.code), C.int(min(p.code_size, 300))))
	if name == "" {
		return func() {}
	}
	aliasMu.Lock()
	_, declared := aliasDecl[name]
	aliasMu.Unlock()
	if !declared {
		return func() {}
	}
	format, code := c.Program()
	out := aliasFor(code)
	if out == nil {
		return func() {}
	}
	prog := (*C.nitro_pjrt_program)(C.malloc(C.size_t(unsafe.Sizeof(C.nitro_pjrt_program{}))))
	*prog = *p
	prog.code = (*C.char)(C.CBytes(out))
	prog.code_size = C.size_t(len(out))
	was := c.args.program
	c.args.program = prog
	c.prog = &Program{Format: format, Code: out}
	return func() {
		c.args.program = was
		C.free(unsafe.Pointer(prog.code))
		C.free(unsafe.Pointer(prog))
	}
}
