package tabular

import (
	"fmt"

	"github.com/nitro-go/nitro/core"
)

// SweepPoint is one multiplier's epoch of a Sweep.
type SweepPoint struct {
	Multiplier float32
	Epoch      int     // the epoch trained at this multiplier
	TrainLoss  float64 // mean MSE over the epoch's batches
	ValMSE     float64 // val_mse after the epoch
}

// Sweep trains one more epoch of n at each multiplier in turn, setting LRScale by SetDevice
// before each, and reports each epoch's losses. The points continue one run (a learning-rate
// range test), so a point's loss also depends on the points before it. The Nitro must be a
// Regression's, with MaxEpochs room for one epoch per multiplier past those done. Each point is
// one TrainEpochs call, so the run's log record stays open across the sweep until the horizon
// (or the caller's EndRun).
func Sweep(n *core.Nitro, multipliers []float32) ([]SweepPoint, error) {
	if _, ok := n.Experiment().(*Regression); !ok {
		return nil, fmt.Errorf("tabular.Sweep: the Nitro's experiment is %T, want *tabular.Regression", n.Experiment())
	}
	var pts []SweepPoint
	for _, m := range multipliers {
		if err := n.SetDevice("LRScale", m); err != nil {
			return pts, err
		}
		before := n.Epoch()
		if err := n.TrainEpochs(before + 1); err != nil {
			return pts, fmt.Errorf("tabular.Sweep: multiplier %g: %w", m, err)
		}
		if n.Epoch() != before+1 {
			return pts, fmt.Errorf("tabular.Sweep: multiplier %g trained no epoch (epoch %d before and after)", m, before)
		}
		h := n.History()
		last := h[len(h)-1]
		mse, ok := last.Val["val_mse"]
		if !ok {
			return pts, fmt.Errorf("tabular.Sweep: multiplier %g: the epoch reports no validation mse (%v): the Nitro needs a val split", m, last.Val)
		}
		pts = append(pts, SweepPoint{Multiplier: m, Epoch: last.Epoch, TrainLoss: last.TrainLoss, ValMSE: mse})
	}
	return pts, nil
}
