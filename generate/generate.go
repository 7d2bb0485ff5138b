package generate

import (
	"fmt"
	"slices"
)

// Stepper is a model that reads one token at a time: a transformer with a key/value cache, or
// one that recomputes its window on every Step.
type Stepper interface {
	// Context is the number of positions the model attends over: a Step's pos is below it.
	Context() int
	// Reset forgets every token fed: the next Step is at position 0.
	Reset() error
	// Step feeds token at pos (0 after Reset, then one more each call) and returns the logits of
	// the token that follows it, one per vocabulary entry. The caller may keep the slice.
	Step(token, pos int) ([]float32, error)
}

// Generate feeds prompt to s and returns o.Tokens tokens drawn after it (the prompt not
// included). The prompt goes through Step position by position, then each drawn token; when the
// next position would be Context, s is Reset and the sequence's last max(1, Context/2) tokens
// are fed again from position 0, so the model keeps half a window of what it wrote. An empty
// prompt, one longer than Context and a negative token are refused before anything is fed.
func Generate(s Stepper, prompt []int, o Options) ([]int, error) {
	smp, err := NewSampler(o)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("generate: nil Stepper")
	}
	ctx, err := contextOf(s)
	if err != nil {
		return nil, err
	}
	if err := checkPrompt(prompt, ctx); err != nil {
		return nil, err
	}
	seq := slices.Clone(prompt)
	logits, err := feed(s, seq)
	if err != nil {
		return nil, err
	}
	pos := len(seq) // the next token's position
	out := make([]int, 0, o.Tokens)
	for {
		t, err := smp.Next(logits)
		if err != nil {
			return nil, fmt.Errorf("%w (at token %d of %d generated)", err, len(out)+1, o.Tokens)
		}
		out, seq = append(out, t), append(seq, t)
		if len(out) == o.Tokens {
			return out, nil
		}
		if pos == ctx {
			keep := max(1, ctx/2)
			if logits, err = feed(s, seq[len(seq)-keep:]); err != nil {
				return nil, err
			}
			pos = keep
			continue
		}
		if logits, err = step(s, t, pos); err != nil {
			return nil, err
		}
		pos++
	}
}

// checkPrompt refuses a prompt the window cannot hold or a token no vocabulary has.
func checkPrompt(prompt []int, ctx int) error {
	if len(prompt) == 0 {
		return fmt.Errorf("generate: the prompt (--prompt) is empty: give at least one token for the model to continue")
	}
	if len(prompt) > ctx {
		return fmt.Errorf("generate: the prompt (--prompt) is %d tokens, more than the model's context of %d: shorten it to at most %d (its end is what the model continues)", len(prompt), ctx, ctx)
	}
	for i, t := range prompt {
		if t < 0 {
			return fmt.Errorf("generate: the prompt's token %d is %d: tokens are >= 0", i, t)
		}
	}
	return nil
}

// feed resets s and feeds tokens from position 0, returning the logits after the last.
func feed(s Stepper, tokens []int) ([]float32, error) {
	if err := guard("Reset", func() error { return s.Reset() }); err != nil {
		return nil, err
	}
	var logits []float32
	for pos, t := range tokens {
		var err error
		if logits, err = step(s, t, pos); err != nil {
			return nil, err
		}
	}
	return logits, nil
}

// step is one Step, its error or panic naming the position.
func step(s Stepper, token, pos int) (logits []float32, err error) {
	err = guard(fmt.Sprintf("Step(token %d, position %d)", token, pos), func() error {
		logits, err = s.Step(token, pos)
		return err
	})
	return logits, err
}

// contextOf is s.Context(), refused below 1.
func contextOf(s Stepper) (ctx int, err error) {
	err = guard("Context", func() error { ctx = s.Context(); return nil })
	if err == nil && ctx < 1 {
		err = fmt.Errorf("generate: the model's Context() is %d: a Stepper attends over at least 1 position", ctx)
	}
	return ctx, err
}

// guard runs a Stepper method, returning its error or panic as an error naming the call.
func guard(call string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("generate: the model's %s panicked: %v", call, r)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("generate: the model's %s: %w", call, err)
	}
	return nil
}
