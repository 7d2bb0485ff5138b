package core

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/runstatus"
)

// The epoch's checkpoint: the training state (engine/statetensors.go), the epoch's metrics, the
// experiment's values, the anchors, the logger's and early stopping's state, into one
// checkpoint.Record the checkpointer saves.

// saveCheckpoint writes the epoch's checkpoint through the checkpointer, if any. A failed save
// stops the run (a run that cannot checkpoint loses its work at the next crash); a save whose
// only failure was removing a displaced file is a warning. The read-back of the state and the
// write run in the Checkpointing phase, so a stall watchdog gives a slow disk the patience of a
// long phase instead of a step's; the phase it interrupted is restored afterwards.
func (n *Nitro) saveCheckpoint(res EpochResult, reason runstatus.Status) error {
	if n.ck.c == nil {
		return nil
	}
	return n.tracker.WithCheckpointing(func() error { return n.writeCheckpoint(res, reason) })
}

// writeCheckpoint is saveCheckpoint's work: the record, then the checkpointer's Save.
func (n *Nitro) writeCheckpoint(res EpochResult, reason runstatus.Status) error {
	rec, err := n.record(res, reason)
	if err != nil {
		return fmt.Errorf("epoch %d: checkpoint: %w", res.Epoch, err)
	}
	path, err := n.ck.c.Save(rec)
	switch {
	case errors.Is(err, checkpoint.ErrNotRotated):
		n.spec.warn(err.Error())
	case err != nil:
		return fmt.Errorf("epoch %d: %w", res.Epoch, err)
	}
	n.ck.last = path
	return nil
}

// littleEndian: a record's data is little-endian and tensors hold native bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// record converts the training state and the epoch's summary into a checkpoint record.
func (n *Nitro) record(res EpochResult, reason runstatus.Status) (*checkpoint.Record, error) {
	if !littleEndian {
		return nil, errors.New("checkpoints hold little-endian data and this host is big-endian")
	}
	r := &checkpoint.Record{
		Epoch: n.st.epoch, Step: n.st.step, StopReason: reason, Preset: n.spec.opts.preset,
		Metrics:  epochMetrics(res),
		RunID:    logjson.RunID(n.log.l),
		RunURL:   logjson.RunURL(n.log.l),
		Values:   n.spec.recordValues(),
		Derived:  n.spec.derived,
		Position: n.recordPosition(), // collective.go
		Build:    engine.BuildIdentity(),
	}
	if n.spec.cfg.precision.value.Casts() { // a float32 record stays as it was before modes
		r.MixedPrecision = n.spec.cfg.precision.value.String()
	}
	if a := n.spec.cfg.accum.value; a > 1 { // 0 in the record is 1
		r.Accum = a
	}
	ts, err := n.eng.StateTensors(engine.WholePart)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		r.Tensors = append(r.Tensors, t.Tensor)
	}
	if r.AnchorChecksums, err = n.anchorChecksums(); err != nil {
		return nil, err
	}
	if n.log.l != nil {
		r.LoggerType = logjson.TypeName(n.log.l) // recorded even without state: which logger wrote the run
		if _, st, err := logjson.State(n.log.l); err != nil {
			n.log.failed("state", err) // a logger never stops the run: this checkpoint keeps no logger state
		} else {
			r.LoggerState = st
		}
	}
	if es := n.ck.es; es != nil {
		ctl, err := es.controlState()
		if err != nil {
			return nil, err
		}
		if ctl != nil {
			if r.Control, err = json.Marshal(ctl); err != nil {
				return nil, err
			}
		}
	}
	if r.Control, err = n.recordWorldSize(r.Control); err != nil { // collective.go
		return nil, err
	}
	if r.Control, err = n.recordHorizon(r.Control); err != nil { // periods.go
		return nil, err
	}
	return r, nil
}

// epochMetrics is what a record keeps of an epoch: train_loss, the TrainMetrics as train_*, the
// validation metrics as val_* (the names the logger and the console use).
func epochMetrics(res EpochResult) map[string]float64 {
	m := withPrefix("train_", res.Train)
	for k, v := range withPrefix("val_", res.Val) {
		m[k] = v
	}
	m["train_loss"] = res.TrainLoss
	return m
}

// recordValues renders the experiment's fields by kind: GraphConst as the compile key prints
// them, Device and Host as plain scalars (other values, which may be whole arrays, left out).
func (su *runSpec) recordValues() checkpoint.Values { return valuesOf(su.e, su.gcValues) }

// valuesOf is recordValues for any experiment e, its GraphConst values given as
// markers.GraphConstValues prints them.
func valuesOf(e any, gc [][2]string) checkpoint.Values {
	v := checkpoint.Values{GraphConst: map[string]string{}, Device: map[string]string{}, Host: map[string]string{}}
	for _, kv := range gc {
		v.GraphConst[kv[0]] = kv[1]
	}
	if dvs, err := markers.DeviceValues(e); err == nil {
		for _, dv := range dvs {
			if s, ok := markers.ValueText(reflect.ValueOf(dv.Value)); ok {
				v.Device[dv.Name] = s
			}
		}
	}
	fields, _ := markers.ConfigMetadata(e)
	s := reflect.ValueOf(e).Elem()
	for _, f := range fields {
		if f.Kind == markers.KindHost {
			if t, ok := markers.ValueText(s.Field(f.Index)); ok {
				v.Host[f.Name] = t
			}
		}
	}
	return v
}

// anchorChecksums is, per group decaying toward a non-zero anchor (w0 or an array), a checksum
// of that anchor: the record keeps it instead of the parameter-sized arrays, and a resume
// refuses a group whose anchor differs. Computed once (the anchor is a constant leaf).
func (n *Nitro) anchorChecksums() (map[string]string, error) {
	if n.ck.anchors != nil {
		return n.ck.anchors, nil
	}
	out, err := n.eng.DecayAnchorChecksums()
	if err != nil {
		return nil, err
	}
	n.ck.anchors = out
	return out, nil
}
