package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/prefetch"
)

// Micro is one micro-batch's values: its loss, and its train metrics (TrainStep's stats in
// manual mode) by name when the step was asked to read them.
type Micro struct {
	Loss    float64
	Metrics map[string]float64 // nil when not read, or when there are none
}

// StepValues is one optimizer step's values, per micro-batch in order. A non-finite loss ends
// the step at its micro-batch, before the update: it is then the last. Stop is set, in a run of
// several processes, when any of them voted to stop after this step (Config.StopVote).
type StepValues struct {
	Micro []Micro
	Stop  bool
}

// Loss is the step's loss: its last micro-batch's.
func (s StepValues) Loss() float64 { return s.Micro[len(s.Micro)-1].Loss }

// Step runs optimizer step step (1-based): Accum runs of the gradient program on the batches
// next yields (placed on the device, their keys fields), then one run of the optimizer program,
// or one run of the fused or manual step program. read asks for the train metrics. Parameters,
// optimizer and layer state are replaced on the device; a batch's device copies are freed as
// soon as its program has run.
func (e *Engine) Step(step int, keys []string, next func() (map[string]*tensors.Tensor, error), read bool) (StepValues, error) {
	var res StepValues
	if e.fused || e.hooks.TrainStep != nil { // a manual step is one program too
		b, err := next()
		if err != nil {
			return res, err
		}
		m, err := e.fusedStep(b, keys, step, read)
		res.Micro = append(res.Micro, m)
		return res, err
	}
	var acc []*tensors.Tensor // nil: the first micro-batch starts the sums on the device
	for k := 0; k < e.accum; k++ {
		b, err := next()
		if err != nil {
			return res, err
		}
		m, grads, err := e.gradientStep(b, keys, acc, read)
		if err != nil {
			return res, err
		}
		res.Micro = append(res.Micro, m)
		// Across processes every rank must reach the collective: a local non-finite loss is
		// summed in, so the stop below is taken on every rank alike.
		if nonFinite(m.Loss) && e.reducer == nil {
			return res, freeTensors(grads) // the caller stops on it, before the update
		}
		acc = grads
	}
	if e.reducer != nil { // allreduce.go: the step's gradients summed over the processes
		reduced, err := e.reduceStep(acc, &res)
		if err != nil {
			return res, err
		}
		acc = reduced
		for k, m := range res.Micro {
			if nonFinite(m.Loss) {
				res.Micro = res.Micro[:k+1]
				return res, nil // the caller stops on it, before the update
			}
		}
	}
	return res, e.optimizerStep(acc, step)
}

// gradientStep runs the gradient program on one micro-batch and returns its validated loss and
// the (accumulated) gradient of every group's segments, still on the device. With accum > 1, acc
// holds the step's running sums (donated: the outputs replace them), or nil on the step's first
// micro-batch, whose sums start from zeros in the program (see gradientProgram).
func (e *Engine) gradientStep(b map[string]*tensors.Tensor, keys []string, acc []*tensors.Tensor, read bool) (Micro, []*tensors.Tensor, error) {
	w, err := e.trainBatchWidth(b)
	if err != nil {
		return Micro{}, nil, err
	}
	p, err := e.gradientProgram(w, keys)
	if err != nil {
		return Micro{}, nil, err
	}
	args := e.modelArgs(b, keys, true)
	if e.accum > 1 {
		// Sums are parameter-sized: counted with the parameters, so a test of zero parameter
		// uploads per step also proves that no sums came from the host.
		first := acc == nil
		if first {
			// Read only by a select that discards them: the parameters, already on the device
			// and passed twice (neither use donates them).
			for _, g := range e.st.groups {
				for _, t := range g.params {
					args = append(args, arg{t: t, counter: &e.uploads.Params})
				}
			}
		}
		for _, a := range acc {
			args = append(args, arg{t: a, donate: true, counter: &e.uploads.Params})
		}
		args = append(args, e.firstArg(first))
	}
	outs, err := e.execute(p, args)
	if err = errors.Join(err, freeBatch(b, keys)); err != nil {
		return Micro{}, nil, err
	}
	r := e.results(p, outs)
	grads := r.run(e.trainNames().grads)
	m, err := e.micro(&r, read)
	return m, grads, err
}

// fusedStep runs the fused (or manual) step program on one batch: parameters, optimizer state
// and layer state are replaced (donated). The program keeps the old parameters and state when
// the loss is non-finite, and the caller stops the run on that loss, as the two-program step
// does before its update.
func (e *Engine) fusedStep(b map[string]*tensors.Tensor, keys []string, step int, read bool) (Micro, error) {
	w, err := e.trainBatchWidth(b)
	if err != nil {
		return Micro{}, err
	}
	p, err := e.stepProgram(w, keys) // manual_step.go: TrainStep's program in manual mode
	if err != nil {
		return Micro{}, err
	}
	args := e.modelArgs(b, keys, true)
	k := 0
	for _, g := range e.groups {
		for range g.segs {
			args[k].donate = true // the group's parameters, replaced by the update
			k++
		}
		k += len(e.offsetArgs(g)) // then its offsets
	}
	for i := range e.groups {
		more, err := e.stateArgs(i, step)
		if err != nil {
			return Micro{}, err
		}
		args = append(args, more...)
	}
	args = append(args, e.stepArg(step))
	outs, err := e.execute(p, args)
	if err = errors.Join(err, freeBatch(b, keys)); err != nil {
		return Micro{}, err
	}
	r := e.results(p, outs)
	e.takeUpdates(&r)
	return e.micro(&r, read)
}

// micro takes what every training program returns besides the gradients or the updates: the
// loss, read back through the validated readback the loop branches on, the new layer state,
// installed, and the train metrics, read when read is set. Train metrics are logged, never
// branched on, so they skip the validated readback; unread they are freed unread. It checks that
// the run's outputs were all taken (r.done) before it uses any.
func (e *Engine) micro(r *results, read bool) (Micro, error) {
	loss, layer := r.one(lossOut), r.run(e.trainNames().layer)
	names, stats := r.prefixed(metricOut)
	if err := r.done(); err != nil {
		return Micro{}, err
	}
	v, err := readControlScalar(loss, "loss")
	if err != nil {
		return Micro{}, err
	}
	m := Micro{Loss: v}
	if read && len(names) > 0 {
		m.Metrics = make(map[string]float64, len(names))
		for i, name := range names {
			m.Metrics[strings.TrimPrefix(name, metricOut)] = scalarValue(stats[i])
		}
	}
	e.st.layer = layer
	return m, freeTensors([]*tensors.Tensor{loss}, stats)
}

// trainBatchWidth is a train batch's row count, which must be the train split's.
func (e *Engine) trainBatchWidth(b map[string]*tensors.Tensor) (int, error) {
	w, err := prefetch.BatchWidth(b)
	if err == nil && w != e.trainWidth {
		err = fmt.Errorf("train batch has %d rows, the train split's batches have %d: a train source must yield equal batches", w, e.trainWidth)
	}
	return w, err
}

// freeBatch releases the device copies of a batch's transferred fields as soon as the step that
// used them is done: the host GC cannot see device memory, so leaving them to finalizers can run
// the device out of memory while the host looks idle. Host data stays (the source may reuse it).
func freeBatch(b map[string]*tensors.Tensor, keys []string) error {
	var errs []error
	for _, k := range keys {
		if t := b[k]; t != nil && t.IsOnAnyDevice() {
			if err := t.InvalidateOnDevice(); err != nil {
				errs = append(errs, fmt.Errorf("freeing batch field %q on the device: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

// FreeBatch is freeBatch for a caller that placed a batch it does not run.
func FreeBatch(b map[string]*tensors.Tensor, keys []string) error { return freeBatch(b, keys) }

// freeTensors finalizes program outputs already read back.
func freeTensors(groups ...[]*tensors.Tensor) error {
	var errs []error
	for _, ts := range groups {
		for _, t := range ts {
			if t != nil {
				if err := t.FinalizeAll(); err != nil {
					errs = append(errs, fmt.Errorf("freeing a program output: %w", err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// modelArgs lists parameters (flat, per group), layer state (donated when it is replaced), Device fields and batch fields.
func (e *Engine) modelArgs(b map[string]*tensors.Tensor, keys []string, donateState bool) []arg {
	var args []arg
	for i, g := range e.groups {
		for _, t := range e.st.groups[i].params {
			args = append(args, arg{t: t, counter: &e.uploads.Params})
		}
		args = append(args, e.offsetArgs(g)...)
	}
	for _, s := range e.st.layer {
		args = append(args, arg{t: s, donate: donateState, counter: &e.uploads.LayerState})
	}
	for _, name := range e.devNames {
		args = append(args, arg{t: e.dev[name], counter: &e.uploads.Device})
	}
	for _, k := range keys {
		args = append(args, arg{t: b[k], counter: &e.uploads.Batch})
	}
	return args
}

// readControlScalar is the one validated readback for scalars the driver branches on. A readback
// that returns garbage without raising is a documented failure on PJRT stacks, so the value's
// shape is checked and a failed transfer is an error, never a silent zero.
func readControlScalar(t *tensors.Tensor, what string) (v float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading %s back from the device: %v", what, r)
		}
	}()
	if t == nil || !t.Ok() {
		return 0, fmt.Errorf("reading %s back from the device: the buffer is invalid", what)
	}
	if !t.Shape().IsScalar() {
		return 0, fmt.Errorf("reading %s back: expected a scalar, got %s", what, t.Shape())
	}
	switch x := t.Value().(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	default:
		return 0, fmt.Errorf("reading %s back: expected a float scalar, got %T", what, x)
	}
}

func dtypeOf(name string) dtypes.DType { return dtypes.MapOfNames[name] }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
