package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// stepScratch is what a training step reuses instead of rebuilding: the small scalar inputs it
// passes besides the arrays, so that it does not upload what did not change (each upload is a
// host tensor, a PJRT buffer made from it and, left to itself, a cleanup the GC runs later; a
// constant hyperparameter was all of that once per step), execute's argument slices and what
// reading the outputs by name needs.
type stepScratch struct {
	hyper  [][]hyperScalar    // [group][hyper field]: the device scalar of the value last passed
	first  [2]*tensors.Tensor // accum > 1: the "first micro-batch" flag, false and true
	bufs   []backends.Buffer  // execute's device buffers, cleared after each call
	donate []bool             // execute's donation flags
	fields [][]string         // [group]: the chain's hyperparameter fields (fixed at setup)
	last   lastProgram        // the training program the last step looked up
	taken  []bool             // results': per output, whether a reader took it
	names  *trainNames        // the training programs' output names (outputs.go), listed once
}

// lastProgram is a training program with what identifies it within its engine, so that a step
// finds it without building the memo's key string. Programs are never dropped from the memo,
// so it stays valid for the engine's life.
type lastProgram struct {
	kind  string
	width int
	keys  []string
	p     *program
}

// lastTrain returns the training program of kind at width and keys when the last lookup was it.
func (s *stepScratch) lastTrain(kind string, width int, keys []string) *program {
	if l := &s.last; l.p != nil && l.kind == kind && l.width == width && slices.Equal(l.keys, keys) {
		return l.p
	}
	return nil
}

// trainProgram is memo for the training programs, with the last one kept (see lastProgram).
func (e *Engine) trainProgram(kind string, width int, keys []string, get func() (*program, error)) (*program, error) {
	if p := e.scratch.lastTrain(kind, width, keys); p != nil {
		return p, nil
	}
	p, err := e.memo(fmt.Sprintf("%s/%d/%v", kind, width, keys), get)
	if err == nil {
		e.scratch.last = lastProgram{kind: kind, width: width, keys: slices.Clone(keys), p: p}
	}
	return p, err
}

// hyperFields is group i's chain's hyperparameter fields, listed once per engine (the chain
// builds the list on every call).
func (e *Engine) hyperFields(i int) []string {
	s := &e.scratch
	if len(s.fields) != len(e.groups) {
		s.fields = make([][]string, len(e.groups))
		for j, g := range e.groups {
			s.fields[j] = g.opt.HyperFields()
		}
	}
	return s.fields[i]
}

// runArgs returns execute's two argument slices at length k, reusing their storage.
func (s *stepScratch) runArgs(k int) ([]backends.Buffer, []bool) {
	if cap(s.bufs) < k {
		s.bufs, s.donate = make([]backends.Buffer, k), make([]bool, k)
	}
	return s.bufs[:k], s.donate[:k]
}

// hyperScalar is a hyperparameter's scalar as last passed to a program.
type hyperScalar struct {
	bits uint32 // math.Float32bits of its value: equal bits, the same scalar
	t    *tensors.Tensor
}

// hyperArg is group i's hyperparameter j at value v as a program input. The tensor is kept
// while the value holds: it is uploaded by the first program that reads it and stays on the
// device (never donated), so a constant hyperparameter costs one upload per run and a scheduled
// one one per change of value. The scalar a change replaces is freed at once.
func (e *Engine) hyperArg(i, j int, v float32) arg {
	s := &e.scratch
	for len(s.hyper) <= i {
		s.hyper = append(s.hyper, nil)
	}
	for len(s.hyper[i]) <= j {
		s.hyper[i] = append(s.hyper[i], hyperScalar{})
	}
	h := &s.hyper[i][j]
	if h.t == nil || h.bits != math.Float32bits(v) || !h.t.Ok() {
		if h.t != nil {
			_ = h.t.FinalizeAll() // no longer passed; a failed free only leaves it to the GC
		}
		h.bits, h.t = math.Float32bits(v), tensors.FromScalar(v)
	}
	return arg{t: h.t, counter: &e.uploads.Hyper}
}

// firstArg is the accum > 1 gradient program's Bool "first" input; both values stay on the
// device after their first use.
func (e *Engine) firstArg(first bool) arg {
	k := 0
	if first {
		k = 1
	}
	t := e.scratch.first[k]
	if t == nil || !t.Ok() {
		t = tensors.FromScalar(first)
		e.scratch.first[k] = t
	}
	return arg{t: t, counter: &e.uploads.Hyper}
}

// stepArg is the optimizer step count as a program input. It changes every step, so it is
// uploaded every step, and freed as soon as the program has run (temp) rather than by the GC.
func (e *Engine) stepArg(step int) arg {
	return arg{t: tensors.FromScalar(float32(step)), counter: &e.uploads.Hyper, temp: true}
}
