package generate

import (
	"errors"
	"fmt"
	"math"
)

// MaxTopK bounds Options.TopK: the byte vocabulary, and enough for any sampling worth doing.
const MaxTopK = 256

// Options say how many tokens to generate and how each is drawn. The zero value is not valid:
// Tokens and a positive Temperature (or TopK 1) must be set.
type Options struct {
	Tokens      int     // new tokens to generate, >= 1 (--tokens)
	Temperature float64 // divides the logits before the softmax; > 0, or anything with TopK 1 (--temperature)
	TopK        int     // draw among the TopK most likely tokens: 0 all, 1 greedy (the most likely), at most MaxTopK (--top-k)
	Seed        uint64  // seeds the draws: one seed, one sequence (--seed)
}

// Check refuses every out-of-range option, all of them in one error, each naming its field and
// flag.
func (o Options) Check() error {
	var errs []error
	if o.Tokens < 1 {
		errs = append(errs, fmt.Errorf("Tokens (--tokens) = %d: want at least 1 token to generate", o.Tokens))
	}
	if o.TopK < 0 || o.TopK > MaxTopK {
		errs = append(errs, fmt.Errorf("TopK (--top-k) = %d: want 0 (the whole vocabulary), 1 (greedy) or up to %d", o.TopK, MaxTopK))
	}
	// Greedy decoding takes the arg-max, which no temperature changes, so any value passes there.
	if o.TopK != 1 && !(o.Temperature > 0 && !math.IsInf(o.Temperature, 1)) {
		errs = append(errs, fmt.Errorf("Temperature (--temperature) = %v: want a finite number > 0, or TopK 1 (--top-k 1) for greedy decoding", o.Temperature))
	}
	return errors.Join(errs...)
}
