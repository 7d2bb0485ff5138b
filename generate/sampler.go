package generate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// seedStream is the PCG generator's second word: fixed, so that Options.Seed alone picks the
// sequence of draws.
const seedStream = 0x6e6974726f67656e

// Sampler draws tokens from logits under one Options: its generator is seeded once, so the n-th
// draw of two Samplers with one seed and the same logits is the same token.
type Sampler struct {
	o     Options
	rng   *rand.Rand
	order []int     // candidate tokens, most likely first
	probs []float64 // their unnormalised probabilities
}

// NewSampler checks o and returns a Sampler seeded from o.Seed.
func NewSampler(o Options) (*Sampler, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	return &Sampler{o: o, rng: rand.New(rand.NewPCG(o.Seed, seedStream))}, nil
}

// Next draws one token, an index into logits. TopK 1 takes the arg-max (the lowest index among
// equals) and draws nothing; otherwise the TopK largest logits (ties to the lower index), divided
// by the temperature, are the softmax the token is drawn from. Logits that are empty, hold NaN
// or +Inf, or are all -Inf are refused.
func (s *Sampler) Next(logits []float32) (int, error) {
	if len(logits) == 0 {
		return 0, errors.New("generate: the model returned no logits")
	}
	best := -1
	for i, l := range logits {
		if math.IsNaN(float64(l)) || math.IsInf(float64(l), 1) {
			return 0, fmt.Errorf("generate: logit %d of %d is %v: the model's output is not finite", i, len(logits), l)
		}
		if !math.IsInf(float64(l), -1) && (best < 0 || l > logits[best]) {
			best = i
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("generate: all %d logits are -Inf: no token can be drawn", len(logits))
	}
	if s.o.TopK == 1 {
		return best, nil
	}
	s.order = s.order[:0]
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) {
			s.order = append(s.order, i)
		}
	}
	// A stable sort keeps equal logits in index order, so ties break the same way every time.
	slices.SortStableFunc(s.order, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	if k := s.o.TopK; k > 0 && k < len(s.order) {
		s.order = s.order[:k]
	}
	top := float64(logits[s.order[0]])
	s.probs = s.probs[:0]
	sum := 0.0
	for _, t := range s.order {
		p := math.Exp((float64(logits[t]) - top) / s.o.Temperature)
		s.probs = append(s.probs, p)
		sum += p
	}
	u := s.rng.Float64() * sum
	for i, p := range s.probs {
		if u < p {
			return s.order[i], nil
		}
		u -= p
	}
	return s.order[len(s.order)-1], nil // u at the very top of the sum, after rounding
}
