package core_test

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/prefetch"
)

func quietLine(more ...core.Option) (*core.Nitro, error) {
	return core.New(newLine(), append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithoutLogger(),
		core.WithoutCheckpoints(), core.WithCache(compilecache.New())}, more...)...)
}

// TrainSteps trains to a step count of the run (Line: 4 steps per epoch, 3 epochs here), stopping
// mid-epoch; the next call picks up at the next batch.
func ExampleNitro_TrainSteps() {
	n, err := quietLine(core.WithMaxEpochs(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, to := range []int{6, 9} {
		if err := n.TrainSteps(to); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("step", n.Step(), "epoch", n.Epoch())
	}
	fmt.Println(n.TrainSteps(13))
	// Output:
	// step 6 epoch 2
	// step 9 epoch 3
	// TrainSteps(13): the run's horizon is 12 optimizer steps (MaxEpochs 3 from run option; the field or core.WithMaxEpochs): raise it, since schedules are defined over the horizon
}

// TrainEpochs trains to an epoch count of the run: one more epoch is n.Epoch()+1.
func ExampleNitro_TrainEpochs() {
	n, err := quietLine(core.WithMaxEpochs(5))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		if err := n.TrainEpochs(n.Epoch() + 1); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("epoch", n.Epoch(), "steps", n.Step(), "validated", n.History()[n.Epoch()-1].Val != nil)
	}
	// Output:
	// epoch 1 steps 4 validated true
	// epoch 2 steps 8 validated true
}

// EndRun finishes the log record of a run its caller ends before the horizon (a bounded call
// leaves it open for the next one), with status requested.
func ExampleNitro_EndRun() {
	lg := &logjson.Memory{}
	n, err := quietLine(core.WithMaxEpochs(5), core.WithLogger(lg))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.TrainEpochs(2); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("finished:", lg.Finishes())
	fmt.Println(n.EndRun(), "finished:", lg.Finishes())
	// Output:
	// finished: []
	// <nil> finished: [requested]
}

// SetParameters loads host arrays (weights ported from another framework, say) by the names
// Parameters lists; the next program run reads them. A mismatch names the parameter and both
// shapes.
func ExampleNitro_SetParameters() {
	n, err := quietLine()
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := n.Parameters()
	fmt.Println(keys(p))
	err = n.SetParameters(map[string]any{"line/dense/weights": [][]float32{{2}}, "line/dense/biases": []float32{1}})
	fmt.Println(err)
	out, err := n.Predict(prefetch.Batch{"x": tensors.FromFlatDataAndDimensions([]float32{0, 3}, 2, 1)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out["y"].Value())
	fmt.Println(n.SetParameters(map[string]any{"line/dense/weights": []float32{2}}))
	// Output:
	// [line/dense/biases line/dense/weights]
	// <nil>
	// [[1] [7]]
	// SetParameters: parameter line/dense/weights is (Float32)[1 1], the value given is (Float32)[1]: pass the parameter's dtype and shape
}
