package generate

import "fmt"

// Fake is an in-memory Stepper for tests: its logits are a function of the tokens fed since the
// last Reset (the window), and it refuses, as a cache would break, a position out of order or
// past Ctx and a token outside [0, Vocab). It counts its calls.
type Fake struct {
	Ctx, Vocab int
	// Logits maps the window (the tokens fed since Reset, the last one included) to the next
	// token's logits; nil: the last token plus 1 (mod Vocab) scores 4, every other token 0.
	Logits func(window []int) []float32

	Resets, Steps int
	window        []int
}

var _ Stepper = (*Fake)(nil)

func (f *Fake) Context() int { return f.Ctx }

func (f *Fake) Reset() error {
	f.Resets++
	f.window = f.window[:0]
	return nil
}

func (f *Fake) Step(token, pos int) ([]float32, error) {
	f.Steps++
	if pos != len(f.window) || pos >= f.Ctx {
		return nil, fmt.Errorf("fake: Step at position %d: want %d (positions in order since Reset, below Ctx %d)", pos, len(f.window), f.Ctx)
	}
	if token < 0 || token >= f.Vocab {
		return nil, fmt.Errorf("fake: token %d outside the vocabulary [0, %d)", token, f.Vocab)
	}
	f.window = append(f.window, token)
	if f.Logits != nil {
		return f.Logits(append([]int(nil), f.window...)), nil
	}
	l := make([]float32, f.Vocab)
	l[(token+1)%f.Vocab] = 4
	return l, nil
}
