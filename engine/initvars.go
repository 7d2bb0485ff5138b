package engine

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/pjrthook"
)

// InitializeVariables gives every variable of ctx without a value its first value on backend, the same
// values, bit for bit, and the same random state after, as GoMLX's InitializeVariables over them
// all at once. GoMLX builds that as one program holding every initializer; a random one expands
// to hundreds of instructions, so a model of many arrays compiles (and loads from the disk
// cache) a program of hundreds of thousands, which costs more than the model's training
// programs. Here each variable is initialized by its own InitializeVariables, in the order
// GoMLX would take them, each program reading the random state the previous one left: the
// programs of variables with one shape and initializer are identical, and the interposer's
// sharing window compiles (or loads from disk) each distinct one once and hands that executable
// to the others, so the compile work grows with the distinct programs, not the variables.
//
// InitializeVariables only initializes variables without a value, and its initializer is
// private, so the variables waiting their turn hold a placeholder of their exact shape (the
// shape a variable keeps when its value is set to nil again). On any failure every placeholder
// is taken back off: a variable never keeps one as its value.
func InitializeVariables(ctx *context.Context, backend backends.Backend) (err error) {
	var pending []*context.Variable
	for v := range ctx.IterVariables() {
		if !v.HasValue() {
			pending = append(pending, v)
		}
	}
	placeholders := map[string]*tensors.Tensor{} // one zero tensor per distinct shape
	placed := 0                                  // pending[:placed] were given a placeholder
	defer func() {
		for _, v := range pending[:placed] {
			if isPlaceholder(v, placeholders[v.Shape().String()]) {
				if rerr := v.SetValuePreservingOld(nil); rerr != nil && err == nil {
					err = rerr
				}
			}
		}
		for _, p := range placeholders {
			if ferr := p.FinalizeAll(); ferr != nil && err == nil {
				err = ferr
			}
		}
	}()
	for _, v := range pending {
		key := v.Shape().String()
		p := placeholders[key]
		if p == nil {
			p = tensors.FromShape(v.Shape())
			placeholders[key] = p
		}
		if err := v.SetValuePreservingOld(p); err != nil {
			return fmt.Errorf("initializing parameter %q: %w", v.ScopeAndName(), err)
		}
		placed++
	}
	defer pjrthook.ShareCompiles()()
	// Each call's program is freed when this returns rather than when the garbage collector
	// finds it: a shared executable is freed by its last holder.
	var execs []*context.Exec
	defer func() {
		for _, x := range execs {
			x.Finalize()
		}
	}()
	keep := func(x *context.Exec) error {
		execs = append(execs, x)
		return nil
	}
	for _, v := range pending {
		if err := v.SetValuePreservingOld(nil); err != nil {
			return fmt.Errorf("initializing parameter %q: %w", v.ScopeAndName(), err)
		}
		// An initializer's panic comes back as an error, after the placeholders are off.
		what := fmt.Sprintf("initializing parameter %q", v.ScopeAndName())
		var ierr error
		if err := TryGraph(what, func() { ierr = ctx.InitializeVariables(backend, keep) }); err != nil {
			return err
		}
		if ierr != nil {
			return fmt.Errorf("%s: %w", what, ierr)
		}
		if !v.HasValue() {
			return errors.New("initializing parameter " + v.ScopeAndName() + ": GoMLX left it without a value")
		}
	}
	return nil
}

// isPlaceholder reports whether v's value is the placeholder p (never a real first value).
func isPlaceholder(v *context.Variable, p *tensors.Tensor) bool {
	if p == nil || !v.HasValue() {
		return false
	}
	val, err := v.Value()
	return err == nil && val == p
}
