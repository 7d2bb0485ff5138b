package core_test

import (
	"bufio"
	stdcontext "context" // gomlx's context (below) is the model's variables
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/schedules"
)

// Line learns y = 2x + 1 with one Dense layer. Its predictions are multiplied by Scale, a Device
// field: a traced input that SetDevice can change without recompiling anything.
type Line struct {
	Scale     markers.Device[float32]
	MaxEpochs int
}

type LineIn struct {
	X *graph.Node `batch:"x"`
}

type LineTarget struct {
	Y *graph.Node `batch:"y"`
}

func (e *Line) BuildModel(ctx *context.Context) error { return nil }

// BuildData returns 64 training samples in batches of 16 (the train split must drop a partial
// batch), and 40 validation and 20 test samples whose final batches are short.
func (e *Line) BuildData() (prefetch.Data, error) {
	split := func(n int, seed uint64, drop bool) (*prefetch.ArrayBatches, error) {
		r := rand.New(rand.NewPCG(seed, 1))
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			y[i] = 2*x[i] + 1
		}
		return prefetch.NewArrayBatches(map[string]*tensors.Tensor{
			"x": tensors.FromFlatDataAndDimensions(x, n, 1),
			"y": tensors.FromFlatDataAndDimensions(y, n, 1),
		}, 16, prefetch.ArrayOptions{Shuffle: drop, Seed: seed, DropPartial: drop})
	}
	train, err := split(64, 1, true)
	if err != nil {
		return nil, err
	}
	val, err := split(40, 2, false)
	if err != nil {
		return nil, err
	}
	test, err := split(20, 3, false)
	if err != nil {
		return nil, err
	}
	return prefetch.Data{"train": train, "val": val, "test": test}, nil
}

func (e *Line) Forward(ctx *context.Context, in LineIn) core.Outputs {
	pred := layers.Dense(ctx.In("line"), in.X, true, 1)
	return core.Outputs{"y": graph.Mul(pred, e.Scale.Node())}
}

func (e *Line) Loss(out core.Outputs, in LineTarget) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], in.Y)))
}

func newLine() *Line { return &Line{Scale: markers.NewDevice[float32](1), MaxEpochs: 2} }

// New runs setup only: hooks checked, data built, parameters initialized and placed on the
// device. Nothing is trained or compiled yet. (These examples pass WithoutLogger, so they keep no
// runs/Line/metrics.jsonl; see ExampleWithLogger and Example_metricsFile for the run's record.)
func ExampleNew() {
	cache := compilecache.New()
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(cache))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("total optimizer steps:", n.TotalSteps())
	fmt.Println("steps taken:", n.Step())
	fmt.Println("programs compiled:", cache.Stats().Entries)

	// A malformed experiment fails here, naming what is wrong and how to fix it.
	_, err = core.New(Line{}, core.WithBackend("go"), core.Quiet())
	fmt.Println(err)
	// Output:
	// total optimizer steps: 8
	// steps taken: 0
	// programs compiled: 0
	// core.New takes a pointer to an experiment struct, got core_test.Line
}

// Train runs MaxEpochs epochs (a field of Line here, a run option wins over it), validating after
// each one.
func ExampleNitro_Train() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()), core.WithMaxEpochs(3), core.WithLearningRate(0.05))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	h := n.History()
	fmt.Println("epochs:", n.Epoch(), "steps:", n.Step(), "stop:", n.StopReason())
	fmt.Println("validated every epoch:", len(h) == 3 && h[2].Val[core.ValLoss] >= 0)
	fmt.Println("learned:", h[2].Val[core.ValLoss] < h[0].Val[core.ValLoss])
	// Output:
	// epochs: 3 steps: 12 stop: completed
	// validated every epoch: true
	// learned: true
}

// Validate evaluates the "val" split; it works on a Nitro that never trained. With no Metrics
// hook, it reports val_loss: each batch's Loss weighed by its rows, the mean over the split's samples.
func ExampleNitro_Validate() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := n.Validate()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sortedNames(m))
	// Output:
	// [val_loss]
}

// Evaluate runs any split BuildData returned, and names the available ones for any other.
func ExampleNitro_Evaluate() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := n.Evaluate("test")
	fmt.Println(sortedNames(m), err)
	_, err = n.Evaluate("holdout")
	fmt.Println(err)
	// Output:
	// [val_loss] <nil>
	// no split "holdout": BuildData returned [test train val]
}

// Predict runs Forward on one batch and returns its outputs on the host. A batch needs only the
// fields Forward declares: no labels.
func ExampleNitro_Predict() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	x := tensors.FromFlatDataAndDimensions([]float32{0, 1, 2}, 3, 1)
	p, err := n.Predict(prefetch.Batch{"x": x})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p["y"].Shape())

	// A bare array is refused: Forward's inputs are routed by name.
	_, err = n.Predict(x)
	fmt.Println(err)
	// Output:
	// (Float32)[3 1]
	// Predict takes a prefetch.Batch keyed by Forward's declared fields [x], got *tensors.Tensor: wrap the array, e.g. prefetch.Batch{"x": t}
}

// SetDevice changes a Device field of a live Nitro. Device values are program inputs, so the
// next Validate reuses the compiled program.
func ExampleNitro_SetDevice() {
	cache := compilecache.New()
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(cache))
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := n.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	compiled := cache.Stats().Misses
	if err := n.SetDevice("Scale", float32(0.5)); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := n.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	v, _ := n.DeviceValue("Scale")
	fmt.Println("Scale:", v)
	fmt.Println("recompiled:", cache.Stats().Misses != compiled)

	// A Host field reaches no program, so writing it here is refused.
	fmt.Println(n.SetDevice("MaxEpochs", 5) != nil)
	// Output:
	// Scale: 0.5
	// recompiled: false
	// true
}

// budget is a train source that asks its Nitro to stop once it has served a number of batches.
// (Embedding *prefetch.ArrayBatches keeps its Len, DropsPartial and BeginEpoch.)
type budget struct {
	*prefetch.ArrayBatches
	stop func()
	left int
}

func (b *budget) BatchAt(i int) (prefetch.Batch, error) {
	if b.stop != nil {
		if b.left--; b.left == 0 {
			b.stop()
		}
	}
	return b.ArrayBatches.BatchAt(i)
}

// RequestStop, from any goroutine (here the data path), stops Train gracefully: the current
// epoch finishes and is validated, and Train returns nil with StopReason "requested".
func ExampleNitro_RequestStop() {
	e := newLine()
	e.MaxEpochs = 10
	d, err := e.BuildData()
	if err != nil {
		fmt.Println(err)
		return
	}
	b := &budget{ArrayBatches: d["train"].(*prefetch.ArrayBatches)}
	d["train"] = prefetch.NoPrefetch(b) // its counter is not safe for prefetch's concurrent workers
	n, err := core.New(e, core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()), core.WithData(d))
	if err != nil {
		fmt.Println(err)
		return
	}
	// 4 batches an epoch: the 6th batch read is the second of epoch 2.
	b.stop, b.left = n.RequestStop, 6
	err = n.Train()
	fmt.Println("err:", err, "stop:", n.StopReason(), "epochs:", n.Epoch(), "steps:", n.Step())
	fmt.Println("last epoch validated:", n.History()[1].Val != nil)
	// Output:
	// err: <nil> stop: requested epochs: 2 steps: 8
	// last epoch validated: true
}

// TrainContext stops the run when its context is done, as Interrupt does: at the next step
// boundary, after which the epoch is validated and checkpointed and TrainContext returns nil with
// StopReason "requested". A program passes signal.NotifyContext(context.Background(),
// os.Interrupt) for Ctrl+C; here the context is cancelled before the call, so one step runs.
func ExampleNitro_TrainContext() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()), core.WithMaxEpochs(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := stdcontext.WithCancel(stdcontext.Background())
	cancel()
	err = n.TrainContext(ctx)
	fmt.Println("err:", err, "stop:", n.StopReason(), "epochs:", n.Epoch(), "steps:", n.Step())
	fmt.Println("validated:", n.History()[0].Val != nil)
	// Output:
	// err: <nil> stop: requested epochs: 1 steps: 1
	// validated: true
}

// WithLogger hands the run's record to any logjson.Logger; logjson.Memory keeps the calls. Train
// writes one "train" line per optimizer step, one "validate" and one "data" line per epoch, and
// finishes the record with the stop reason.
func ExampleWithLogger() {
	lg := &logjson.Memory{}
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithCache(compilecache.New()), core.WithLogger(lg), core.WithoutCheckpoints())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("params:", sortedKeysOf(lg.Params()[0]))
	for _, m := range lg.Metrics("") {
		fmt.Println(m.Context, "epoch", m.Epoch, "step", m.Step, sortedNames(m.Values))
	}
	fmt.Println("finish:", lg.Status())
	// Output:
	// params: [MaxEpochs Scale accum fused gradient_clip_norm learning_rate max_epochs mixed_precision run_dir seed]
	// train epoch 1 step 1 [loss step_seconds steps_per_second]
	// train epoch 1 step 2 [loss step_seconds steps_per_second]
	// train epoch 1 step 3 [loss step_seconds steps_per_second]
	// train epoch 1 step 4 [loss step_seconds steps_per_second]
	// validate epoch 1 step 4 [val_loss]
	// data epoch 1 step 4 [data_wait_frac epoch_seconds steps_per_second train_seconds]
	// train epoch 2 step 5 [loss step_seconds steps_per_second]
	// train epoch 2 step 6 [loss step_seconds steps_per_second]
	// train epoch 2 step 7 [loss step_seconds steps_per_second]
	// train epoch 2 step 8 [loss step_seconds steps_per_second]
	// validate epoch 2 step 8 [val_loss]
	// data epoch 2 step 8 [data_wait_frac epoch_seconds steps_per_second train_seconds]
	// finish: completed
}

// With no logger option the run's record is <RunDir>/metrics.jsonl, JSON Lines written by a
// logjson.JSONLogger: the params at the end of New, then Train's lines, finish last.
func Example_metricsFile() {
	dir, err := os.MkdirTemp("", "nitro-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithCache(compilecache.New()),
		core.WithRunDir(dir), core.WithMaxEpochs(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	f, err := os.Open(filepath.Join(dir, core.MetricsFile))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Type, Context, Key, Status string
			Step                       int
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(strings.Join(strings.Fields(fmt.Sprint(line.Type, " ", line.Context, " ", line.Key, " ", line.Status)), " "), line.Step)
	}
	// Output:
	// params 0
	// other config_report 0
	// other binding_report 0
	// metrics train 1
	// metrics train 2
	// metrics train 3
	// metrics train 4
	// metrics validate 4
	// metrics data 4
	// finish completed 0
}

// WithMixedPrecision("bf16") computes every float32 matrix product in bfloat16, with no change
// to the model: parameters, gradients, the optimizer state and the loss stay float32.
func ExampleWithMixedPrecision() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()),
		core.WithMixedPrecision("bf16"), core.WithMaxEpochs(3), core.WithLearningRate(0.05))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	h := n.History()
	fmt.Println("learned:", h[2].Val[core.ValLoss] < h[0].Val[core.ValLoss])
	params, _ := n.Parameters()
	fmt.Println("weights:", params["line/dense/weights"].DType())
	for _, line := range strings.Split(n.ConfigReport(), "\n") {
		if strings.Contains(line, "mixed precision") {
			fmt.Println(strings.TrimSpace(line))
		}
	}
	_, err = core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithMixedPrecision("fp16"))
	fmt.Println(err)
	// Output:
	// learned: true
	// weights: Float32
	// mixed precision      bf16 (run option)
	// WithMixedPrecision("fp16"): mixed precision "fp16" is not a mode: use "bf16", or "f32" (also "none" or "") for float32 throughout
}

func sortedKeysOf(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func sortedNames(m map[string]float64) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// WithSchedules changes a schedule for one run, key by key, without editing the experiment; a
// schedules.Parsed (text, as nitro train --schedule gives it) is recorded in the params line.
func ExampleWithSchedules() {
	eta, err := schedules.Parse("cosine:0.05,0.005")
	if err != nil {
		fmt.Println(err)
		return
	}
	lg := &logjson.Memory{}
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithCache(compilecache.New()), core.WithLogger(lg), core.WithoutCheckpoints(),
		core.WithSchedules(map[string]any{"eta": eta}))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(n.BindingReport(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "eta ") {
			fmt.Println(strings.Join(strings.Fields(line), " "))
		}
	}
	fmt.Println("params:", lg.Params()[0]["schedule.eta"])

	_, err = core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(),
		core.WithSchedules(map[string]any{"lr": eta}))
	fmt.Println(strings.SplitN(err.Error(), ": valid keys", 2)[0])
	// Output:
	// eta 0.05 at step 1 schedule eta (run option) scheduled
	// params: cosine:0.05,0.005
	// the run's schedules (run option): unknown schedule key lr
}
