package board

// Point is one value of a series: X is the optimizer step (train) or the epoch (validate, data).
// Step and Epoch are the line's, for the page's other x axes; Secs is the run's training time up
// to the line: the sum of every train line's step_seconds read so far (validation, checkpoint
// writes and pauses are not in it; a resumed run's repeated steps count again, as time spent).
type Point struct {
	X, Y        float64
	Step, Epoch int
	Secs        float64
}

// series keeps at most max points of one metric by decimation: when full it drops every other
// point and from then on keeps one incoming point in stride (doubled at each halving), so the
// kept points stay evenly spread over the whole run and memory stays bounded however long the
// file grows. The newest point is kept apart, so a live curve always ends at its latest value.
type series struct {
	max    int
	stride int // keep one incoming point in stride
	seen   int // points offered since the last halving, for the stride
	pts    []Point
	last   Point
	n      int // points offered in all (before decimation)
}

func newSeries(max int) *series { return &series{max: max, stride: 1} }

// add takes the next point. An X at or before the last one (a resumed run logging from its
// checkpoint's step again) first drops the kept points from that X on: the later lines win.
func (s *series) add(p Point) {
	if s.n > 0 && p.X <= s.last.X {
		i := len(s.pts)
		for i > 0 && s.pts[i-1].X >= p.X {
			i--
		}
		s.pts = s.pts[:i]
	}
	s.n++
	s.last = p
	if s.seen%s.stride == 0 {
		if len(s.pts) >= s.max {
			s.halve()
		}
		s.pts = append(s.pts, p)
	}
	s.seen++
}

func (s *series) halve() {
	k := 0
	for i := 0; i < len(s.pts); i += 2 {
		s.pts[k] = s.pts[i]
		k++
	}
	s.pts = s.pts[:k]
	s.stride *= 2
	s.seen = 0
}

// points is a copy of the kept points with the newest appended when decimation skipped it.
func (s *series) points() []Point {
	out := make([]Point, len(s.pts), len(s.pts)+1)
	copy(out, s.pts)
	if s.n > 0 && (len(out) == 0 || out[len(out)-1] != s.last) {
		out = append(out, s.last)
	}
	return out
}
