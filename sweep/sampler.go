package sweep

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
)

// NewRandom is a seeded random sampler. Trial number's value for a parameter depends only on
// (seed, number, the parameter's name): not on the history, the order trials are asked for or the
// other parameters, so parallel and resumed sweeps propose the same values, and adding a field to
// a space leaves the others' values as they were.
func NewRandom(seed int64) Sampler { return random{seed: seed} }

type random struct{ seed int64 }

func (r random) Sample(space Space, _ []Trial, number int) (map[string]float64, error) {
	if err := space.Check(); err != nil {
		return nil, err
	}
	if number < 0 {
		return nil, fmt.Errorf("trial number %d is negative: trials are numbered from 0", number)
	}
	params := make(map[string]float64, len(space))
	for _, p := range space {
		params[p.Name] = randomValue(r.seed, number, p)
	}
	return params, nil
}

// Stream salts keep the random sampler's and TPE's draws for one (seed, number, name) apart.
const (
	saltRandom = 0x52414e44 // "RAND"
	saltTPE    = 0x54504521 // "TPE!"
)

// rngFor is the generator of one parameter's draws for one trial: a PCG keyed by the seed and by
// a hash of (number, name, salt), so no two trials or parameters share a stream.
func rngFor(seed int64, number int, name string, salt uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	k := h.Sum64() ^ salt
	k ^= uint64(number) * 0x9e3779b97f4a7c15
	k = mix64(k)
	return rand.New(rand.NewPCG(uint64(seed), k))
}

// mix64 is splitmix64's finalizer: it spreads nearby numbers over all 64 bits so consecutive
// trials' streams are unrelated.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// randomValue is p's value for trial number under seed, in Optuna's internal form.
func randomValue(seed int64, number int, p Param) float64 {
	rng := rngFor(seed, number, p.Name, saltRandom)
	switch p.Kind {
	case Choice:
		return float64(rng.IntN(len(p.Choices)))
	case Int:
		return p.Low + float64(rng.Int64N(int64(p.High-p.Low)+1))
	case LogUniform:
		lo, hi := math.Log(p.Low), math.Log(p.High)
		return clamp(math.Exp(lo+rng.Float64()*(hi-lo)), p.Low, p.High)
	}
	return clamp(p.Low+rng.Float64()*(p.High-p.Low), p.Low, p.High)
}

// clamp keeps a value that rounding carried past an end inside the range, so Contains accepts
// every proposal.
func clamp(v, lo, hi float64) float64 { return math.Min(math.Max(v, lo), hi) }

// maxGrid bounds a grid's size: past it a sweep could never finish, and the product would
// overflow.
const maxGrid = 1 << 30

// GridSize is the number of combinations a grid over space has: the product of each choice's
// count and each int's range. Uniform and loguniform params have no finite list and are refused.
func GridSize(space Space) (int, error) {
	if err := space.Check(); err != nil {
		return 0, err
	}
	size := 1
	for _, p := range space {
		n, err := gridCount(p)
		if err != nil {
			return 0, err
		}
		if size > maxGrid/n {
			return 0, fmt.Errorf("grid has more than %d combinations (at %s): use random or tpe, or fewer values", maxGrid, p.Name)
		}
		size *= n
	}
	return size, nil
}

func gridCount(p Param) (int, error) {
	switch p.Kind {
	case Choice:
		return len(p.Choices), nil
	case Int:
		n := p.High - p.Low + 1
		if n > maxGrid {
			return 0, fmt.Errorf("%s=%s has %s values, too many for a grid: use a smaller range, or random or tpe",
				p.Name, p.distribution(), formatFloat(n))
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("%s=%s: a grid needs a finite list of values, and %s has none: list them, e.g. %s=choice:%s",
		p.Name, p.distribution(), p.Kind, p.Name, gridSuggestion(p))
}

// gridSuggestion is three evenly spaced values of p's range (in log for loguniform), to show the
// form choice: takes.
func gridSuggestion(p Param) string {
	vals := make([]string, 3)
	for i := range vals {
		t := float64(i) / 2
		var v float64
		if p.Kind == LogUniform {
			v = math.Exp(math.Log(p.Low) + t*(math.Log(p.High)-math.Log(p.Low)))
		} else {
			v = p.Low + t*(p.High-p.Low)
		}
		vals[i] = strconv.FormatFloat(v, 'g', 3, 64)
	}
	return vals[0] + "," + vals[1] + "," + vals[2]
}

// NewGrid is the cartesian product of space's values in a fixed order, the first parameter
// changing slowest: trial number gets combination number mod the grid's size (a caller running
// more trials than GridSize refuses to). Choice and Int params are enumerated in their order;
// Uniform and LogUniform ones are refused.
func NewGrid(space Space) (Sampler, error) {
	if _, err := GridSize(space); err != nil {
		return nil, err
	}
	return grid{space: space}, nil
}

type grid struct{ space Space }

func (g grid) Sample(space Space, _ []Trial, number int) (map[string]float64, error) {
	if d := g.space.Diff(space); d != "" {
		return nil, errors.New("grid asked for another search space than it was made for: " + d)
	}
	size, err := GridSize(space)
	if err != nil {
		return nil, err
	}
	if number < 0 {
		return nil, fmt.Errorf("trial number %d is negative: trials are numbered from 0", number)
	}
	i := number % size
	params := make(map[string]float64, len(space))
	// Mixed radix, last parameter fastest.
	for j := len(space) - 1; j >= 0; j-- {
		p := space[j]
		n, _ := gridCount(p)
		k := i % n
		i /= n
		if p.Kind == Int {
			params[p.Name] = p.Low + float64(k)
		} else {
			params[p.Name] = float64(k)
		}
	}
	return params, nil
}
