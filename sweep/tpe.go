package sweep

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// TPEOptions are the Tree-structured Parzen Estimator's settings; zero values take Optuna's
// defaults.
type TPEOptions struct {
	Maximize   bool // the study's direction: TPE must know which trials are the good ones
	Startup    int  // trials observed before TPE takes over from random sampling (0: 10)
	Candidates int  // samples drawn from the good trials' estimator per parameter (0: 24)
}

// NewTPE is Optuna's default TPESampler (univariate, prior weight 1, magic clip, endpoints not
// considered, default gamma and weights), made a pure function of (seed, number, history):
//
//   - While fewer than Startup trials are COMPLETE or PRUNED, a trial gets exactly the value
//     NewRandom(seed) gives it, so a TPE sweep's start is a random sweep's.
//   - Then the observed trials are split: the best gamma(n) = min(ceil(n/10), 25) COMPLETE trials
//     by value are "below" (good), the rest "above"; PRUNED trials rank after every COMPLETE one,
//     the one that got furthest (largest last step) first, then by its last reported value, so
//     they are "below" only while too few trials have completed. RUNNING and FAIL trials are not
//     observations.
//   - Each parameter gets two Parzen estimators, l over below and g over above: one kernel per
//     observation plus a prior kernel at the middle of the range as wide as the range, the
//     observations weighted equally up to 25 and older ones ramped down beyond. Numbers live in
//     their internal space (the log for loguniform; an int as a float with ±0.5 around each
//     integer); a choice's kernel puts weight 1 on the observed value plus the prior weight
//     spread over all values.
//   - Candidates values are drawn from l, and the one maximizing log l(x) - log g(x) is proposed.
//
// Each parameter is proposed independently, from an RNG seeded by (seed, number, name).
func NewTPE(seed int64, opts TPEOptions) Sampler {
	if opts.Startup <= 0 {
		opts.Startup = 10
	}
	if opts.Candidates <= 0 {
		opts.Candidates = 24
	}
	return tpe{seed: seed, opts: opts}
}

type tpe struct {
	seed int64
	opts TPEOptions
}

// priorWeight is Optuna's default: the prior kernel counts as much as one observation.
const priorWeight = 1.0

func (s tpe) Sample(space Space, history []Trial, number int) (map[string]float64, error) {
	if err := space.Check(); err != nil {
		return nil, err
	}
	if number < 0 {
		return nil, fmt.Errorf("trial number %d is negative: trials are numbered from 0", number)
	}
	below, above := splitTrials(history, s.opts.Maximize)
	params := make(map[string]float64, len(space))
	for _, p := range space {
		if len(below)+len(above) < s.opts.Startup {
			params[p.Name] = randomValue(s.seed, number, p)
			continue
		}
		params[p.Name] = s.sampleParam(p, observed(p, below), observed(p, above), number)
	}
	return params, nil
}

// splitTrials divides the COMPLETE and PRUNED trials into below (the best gamma(n)) and above
// (the rest), each in trial-number order, as Optuna's _split_trials does for one objective.
func splitTrials(history []Trial, maximize bool) (below, above []Trial) {
	type ranked struct {
		t      Trial
		k1, k2 float64
		pruned bool
	}
	var obs []ranked
	for _, t := range history {
		switch t.State {
		case Complete:
			if !t.HasValue || math.IsNaN(t.Value) {
				continue // no value to rank it by
			}
			v := t.Value
			if maximize {
				v = -v
			}
			obs = append(obs, ranked{t: t, k1: v})
		case Pruned:
			// Furthest first (-step), then by last value; never reported: after all the others.
			r := ranked{t: t, pruned: true, k1: 1}
			if len(t.Intermediate) > 0 {
				step := math.MinInt
				for st := range t.Intermediate {
					step = max(step, st)
				}
				v := t.Intermediate[step]
				switch {
				case math.IsNaN(v):
					v = math.Inf(1)
				case maximize:
					v = -v
				}
				r.k1, r.k2 = -float64(step), v
			}
			obs = append(obs, r)
		}
	}
	slices.SortStableFunc(obs, func(a, b ranked) int {
		if a.pruned != b.pruned {
			if a.pruned {
				return 1
			}
			return -1
		}
		if c := cmpFloat(a.k1, b.k1); c != 0 {
			return c
		}
		if c := cmpFloat(a.k2, b.k2); c != 0 {
			return c
		}
		return a.t.Number - b.t.Number
	})
	nBelow := min(int(math.Ceil(0.1*float64(len(obs)))), 25)
	for i, r := range obs {
		if i < nBelow {
			below = append(below, r.t)
		} else {
			above = append(above, r.t)
		}
	}
	byNumber := func(a, b Trial) int { return a.Number - b.Number }
	slices.SortStableFunc(below, byNumber)
	slices.SortStableFunc(above, byNumber)
	return below, above
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// observed is p's values among trials, in their order, skipping trials whose value does not fit
// p (a record made under another space).
func observed(p Param, trials []Trial) []float64 {
	var vals []float64
	for _, t := range trials {
		v, ok := t.Params[p.Name]
		if ok && p.contains(v) == nil {
			vals = append(vals, v)
		}
	}
	return vals
}

// defaultWeights is Optuna's default_weights: equal up to 25 observations; beyond, the oldest
// n-25 ramp linearly from 1/n up to 1 so recent trials count more.
func defaultWeights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	if n >= 25 {
		ramp := n - 25
		for i := range ramp {
			if ramp == 1 {
				w[i] = 1 / float64(n)
			} else {
				w[i] = 1/float64(n) + float64(i)*(1-1/float64(n))/float64(ramp-1)
			}
		}
	}
	return w
}

// mixtureWeights are the observations' weights with the prior's appended, normalized.
func mixtureWeights(n int) []float64 {
	w := append(defaultWeights(n), priorWeight)
	var sum float64
	for _, x := range w {
		sum += x
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

func (s tpe) sampleParam(p Param, below, above []float64, number int) float64 {
	rng := rngFor(s.seed, number, p.Name, saltTPE)
	switch p.Kind {
	case Choice:
		if len(p.Choices) == 1 {
			return 0
		}
		l := newCatEst(below, len(p.Choices))
		g := newCatEst(above, len(p.Choices))
		best, bestScore := 0.0, math.Inf(-1)
		for i := range s.opts.Candidates {
			c := l.sample(rng)
			if sc := l.logPDF(c) - g.logPDF(c); i == 0 || sc > bestScore {
				best, bestScore = float64(c), sc
			}
		}
		return best
	}
	if p.Low == p.High {
		return p.Low
	}
	low, high, step := p.Low, p.High, 0.0
	toInternal := func(v float64) float64 { return v }
	if p.Kind == LogUniform {
		low, high = math.Log(p.Low), math.Log(p.High)
		toInternal = math.Log
	}
	if p.Kind == Int {
		step = 1
	}
	conv := func(vs []float64) []float64 {
		out := make([]float64, len(vs))
		for i, v := range vs {
			out[i] = toInternal(v)
		}
		return out
	}
	l := newNumEst(conv(below), low, high, step)
	g := newNumEst(conv(above), low, high, step)
	best, bestScore := 0.0, math.Inf(-1)
	for i := range s.opts.Candidates {
		c := l.sample(rng)
		if sc := l.logPDF(c) - g.logPDF(c); i == 0 || sc > bestScore {
			best, bestScore = c, sc
		}
	}
	if p.Kind == LogUniform {
		return clamp(math.Exp(best), p.Low, p.High)
	}
	return clamp(best, low, high)
}

// numEst is a mixture of truncated normals over [low, high] in internal space; with step 1 (an
// int) each kernel is discretized: an integer's mass is the kernel's over [x-0.5, x+0.5], the
// whole truncated to [low-0.5, high+0.5].
type numEst struct {
	mus, sigmas, weights []float64
	low, high, step      float64
}

func newNumEst(obs []float64, low, high, step float64) numEst {
	priorMu := 0.5 * (low + high)
	width := high - low + step
	m := len(obs) + 1 // with the prior

	// Each kernel's bandwidth is the larger gap to its neighbours among the observations and the
	// prior mean, the range's ends (widened by half a step) closing the list; with the ends not
	// considered, the outermost kernels take their inner gap instead.
	mus := append(slices.Clone(obs), priorMu)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpFloat(mus[a], mus[b]) })
	ends := make([]float64, m+2)
	ends[0] = low - step/2
	for i, j := range order {
		ends[i+1] = mus[j]
	}
	ends[m+1] = high + step/2
	sorted := make([]float64, m)
	for i := range sorted {
		sorted[i] = math.Max(ends[i+1]-ends[i], ends[i+2]-ends[i+1])
	}
	if m+2 >= 4 {
		sorted[0] = ends[2] - ends[1]
		sorted[m-1] = ends[m] - ends[m-1]
	}
	sigmas := make([]float64, m)
	for i, j := range order {
		sigmas[j] = sorted[i]
	}
	// Magic clip: no kernel narrower than the range over min(100, kernels+1), none wider than it.
	minSigma := width / math.Min(100, 1+float64(m))
	for i := range sigmas {
		sigmas[i] = math.Min(math.Max(sigmas[i], minSigma), width)
	}
	sigmas[m-1] = width // the prior's own bandwidth
	return numEst{mus: mus, sigmas: sigmas, weights: mixtureWeights(len(obs)), low: low, high: high, step: step}
}

// bounds are the truncation's ends: the range, widened by half a step for an int.
func (e numEst) bounds() (float64, float64) { return e.low - e.step/2, e.high + e.step/2 }

func (e numEst) sample(rng *rand.Rand) float64 {
	k := pick(rng, e.weights)
	lo, hi := e.bounds()
	mu, sigma := e.mus[k], e.sigmas[k]
	x := mu + sigma*truncNormal(rng, (lo-mu)/sigma, (hi-mu)/sigma)
	if e.step > 0 {
		x = e.low + math.Round((x-e.low)/e.step)*e.step
	}
	return clamp(x, e.low, e.high)
}

func (e numEst) logPDF(x float64) float64 {
	lo, hi := e.bounds()
	terms := make([]float64, len(e.mus))
	for k, mu := range e.mus {
		sigma := e.sigmas[k]
		norm := logGaussMass((lo-mu)/sigma, (hi-mu)/sigma)
		var lp float64
		if e.step > 0 {
			a := math.Max(x-e.step/2, lo)
			b := math.Min(x+e.step/2, hi)
			lp = logGaussMass((a-mu)/sigma, (b-mu)/sigma) - norm
		} else {
			z := (x - mu) / sigma
			lp = -0.5*z*z - 0.5*math.Log(2*math.Pi) - math.Log(sigma) - norm
		}
		terms[k] = math.Log(e.weights[k]) + lp
	}
	return logSumExp(terms)
}

// catEst is a mixture of categorical kernels: an observation's puts weight 1 on its value plus
// the prior weight spread over all values (renormalized); the prior kernel is uniform.
type catEst struct {
	rows    [][]float64 // per kernel, the probability of each value
	weights []float64
}

func newCatEst(obs []float64, n int) catEst {
	kernels := len(obs) + 1
	rows := make([][]float64, kernels)
	for k := range rows {
		row := make([]float64, n)
		for j := range row {
			row[j] = priorWeight / float64(kernels)
		}
		if k < len(obs) {
			row[int(obs[k])]++
		}
		var sum float64
		for _, v := range row {
			sum += v
		}
		for j := range row {
			row[j] /= sum
		}
		rows[k] = row
	}
	return catEst{rows: rows, weights: mixtureWeights(len(obs))}
}

func (e catEst) sample(rng *rand.Rand) int {
	return pick(rng, e.rows[pick(rng, e.weights)])
}

func (e catEst) logPDF(c int) float64 {
	var p float64
	for k, row := range e.rows {
		p += e.weights[k] * row[c]
	}
	return math.Log(p)
}

// pick draws an index with probability proportional to w.
func pick(rng *rand.Rand, w []float64) int {
	var sum float64
	for _, x := range w {
		sum += x
	}
	u := rng.Float64() * sum
	for i, x := range w {
		if u < x {
			return i
		}
		u -= x
	}
	return len(w) - 1
}

func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// ndtr is the standard normal CDF.
func ndtr(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// logNdtr is log Φ(x), kept finite far into the lower tail by the asymptotic series where Φ
// underflows.
func logNdtr(x float64) float64 {
	if x > -20 {
		return math.Log(ndtr(x))
	}
	x2 := x * x
	return -0.5*x2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log1p(-1/x2+3/(x2*x2))
}

// logGaussMass is log(Φ(b) - Φ(a)) for a < b, computed on the side of 0 where the difference
// does not cancel.
func logGaussMass(a, b float64) float64 {
	switch {
	case b <= 0:
		return logDiffNdtr(b, a)
	case a >= 0:
		return logDiffNdtr(-a, -b)
	}
	return math.Log1p(-ndtr(a) - ndtr(-b))
}

// logDiffNdtr is log(Φ(hi) - Φ(lo)) for lo < hi <= 0.
func logDiffNdtr(hi, lo float64) float64 {
	lh, ll := logNdtr(hi), logNdtr(lo)
	return lh + math.Log1p(-math.Exp(ll-lh))
}

// truncNormal draws a standard normal truncated to [a, b] by inverting the CDF, on the side of 0
// that keeps precision.
func truncNormal(rng *rand.Rand, a, b float64) float64 {
	if a >= 0 {
		return -truncNormal(rng, -b, -a)
	}
	u := rng.Float64()
	pa, pb := ndtr(a), ndtr(b)
	mass := pb - pa
	if !(mass > 0) {
		return clamp(0, a, b)
	}
	var x float64
	if p := pa + u*mass; p < 0.5 {
		x = -math.Sqrt2 * math.Erfcinv(2*p)
	} else {
		// The upper tail, measured from b's side: 1-p without cancelling.
		q := ndtr(-b) + (1-u)*mass
		x = math.Sqrt2 * math.Erfcinv(2*q)
	}
	return clamp(x, a, b)
}
