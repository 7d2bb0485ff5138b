package core

import "time"

// Train-line keys the loop adds to each "train" line: the mean wall time of the optimizer steps
// since the previous line (every step's own under WithLogEvery(1)) and its inverse.
const (
	KeyStepSeconds    = "step_seconds"
	KeyStepsPerSecond = "steps_per_second"
)

// stepClock times an epoch's optimizer steps, and nothing else: it starts when the epoch's first
// step is about to run and reads at each step's end, so validation, checkpointing and the epoch's
// setup (the batch stream's start) stay out of the figures.
type stepClock struct {
	start, lap time.Time
	steps      int // steps since lap
	elapsed    time.Duration
}

func (c *stepClock) begin() {
	c.start = time.Now()
	c.lap, c.steps = c.start, 0
}

// step counts a finished step; on a logged step it adds the window's timing to the line.
func (c *stepClock) step(logged bool, line map[string]float64) {
	now := time.Now()
	c.steps++
	c.elapsed = now.Sub(c.start)
	if !logged {
		return
	}
	per := now.Sub(c.lap).Seconds() / float64(c.steps)
	line[KeyStepSeconds] = per
	line[KeyStepsPerSecond] = 1 / max(per, 1e-12)
	c.lap, c.steps = now, 0
}

// timed fills an epoch's timing from its clock: TrainSeconds, StepSeconds and StepsPerSecond.
func (res *EpochResult) timed(c *stepClock) {
	res.TrainSeconds = c.elapsed.Seconds()
	if res.Steps > 0 {
		res.StepSeconds = res.TrainSeconds / float64(res.Steps)
		res.StepsPerSecond = float64(res.Steps) / max(res.TrainSeconds, 1e-12)
	}
}
