package core_test

import (
	"math"
	"testing"
	"time"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/prefetch"
)

// slowBatches sleeps before every batch: a validation split that takes a known minimum time.
type slowBatches struct {
	*prefetch.ArrayBatches
	d time.Duration
}

func (s slowBatches) BatchAt(i int) (prefetch.Batch, error) {
	time.Sleep(s.d)
	return s.ArrayBatches.BatchAt(i)
}

// The step timing covers the optimizer steps alone: the "train" lines' step_seconds tile the
// epoch's TrainSeconds exactly (each window ends where the next begins), and a validation pass
// whose batches sleep 60 ms lands in Seconds but in neither. The sleep is a lower bound, so no speed is
// assumed.
func TestStepTimingExcludesValidation(t *testing.T) {
	const nap = 60 * time.Millisecond
	for _, every := range []int{1, 3} {
		lg := &logjson.Memory{}
		d := coretest.Data(t, 0)
		d["val"] = slowBatches{coretest.Arrays(t, 32, 16, 2, prefetch.ArrayOptions{}), nap}
		n := coretest.MustNew(t, &coretest.Reg{}, d, core.WithMaxEpochs(2), core.WithLogger(lg), core.WithLogEvery(every))
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		sum := map[int]float64{}
		prev := 0
		for _, m := range lg.Metrics(logjson.ContextTrain) {
			// a window spans the steps since the previous line (of any epoch: the clock restarts
			// with each epoch, so it is the steps of this epoch since then)
			from := max(prev, (m.Epoch-1)*4)
			sum[m.Epoch] += m.Values[core.KeyStepSeconds] * float64(m.Step-from)
			prev = m.Step
		}
		for _, h := range n.History() {
			if h.Steps != 4 || !(h.TrainSeconds > 0) || h.Seconds-h.TrainSeconds < nap.Seconds() {
				t.Errorf("every %d, epoch %d: Seconds %v, TrainSeconds %v, steps %d; want train time without the >= %v of validation (its batches may load in parallel)",
					every, h.Epoch, h.Seconds, h.TrainSeconds, h.Steps, nap)
			}
			if math.Abs(h.StepSeconds*4-h.TrainSeconds) > 1e-12 || math.Abs(h.StepsPerSecond*h.TrainSeconds-4) > 1e-9 {
				t.Errorf("epoch %d: StepSeconds %v, StepsPerSecond %v, TrainSeconds %v disagree", h.Epoch, h.StepSeconds, h.StepsPerSecond, h.TrainSeconds)
			}
			// LogEvery 3 logs steps 3 and 6: epoch 1's last step and epoch 2's step 8 go unlogged.
			if every == 1 && math.Abs(sum[h.Epoch]-h.TrainSeconds) > 1e-9 {
				t.Errorf("epoch %d: the train lines' step times sum to %v, TrainSeconds is %v", h.Epoch, sum[h.Epoch], h.TrainSeconds)
			}
			if every == 3 && !(sum[h.Epoch] > 0 && sum[h.Epoch] <= h.TrainSeconds) {
				t.Errorf("every 3, epoch %d: logged windows sum to %v, beyond TrainSeconds %v", h.Epoch, sum[h.Epoch], h.TrainSeconds)
			}
		}
	}
}
