package checkpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/nitro-go/nitro/runstatus"
	"github.com/nitro-go/nitro/tensorfile"
)

// Tensor is one named array as plain data (tensorfile's): Data holds the elements
// little-endian, row-major.
type Tensor = tensorfile.Tensor

// Values holds an experiment's field values by category, each rendered as a string.
type Values struct {
	GraphConst map[string]string `json:"graph_const,omitempty"`
	Device     map[string]string `json:"device,omitempty"`
	Host       map[string]string `json:"host,omitempty"`
}

// Record is one checkpoint: the tensors, in the order given (the file keeps it), and the
// metadata a resume or a reader needs. Strings must be valid UTF-8; LoggerState and Control
// must be JSON (they are stored compacted).
type Record struct {
	Tensors []Tensor

	Epoch           int
	Step            int
	Metrics         map[string]float64 // non-finite values survive (stored as "NaN", "+Inf", "-Inf")
	StopReason      runstatus.Status   // "" for an epoch the run went on after
	Preset          string
	RunID           string
	RunURL          string
	Values          Values
	Derived         map[string]string // derived values, recomputed and compared on resume
	AnchorChecksums map[string]string // per group, the decay anchor's checksum
	LoggerType      string
	LoggerState     json.RawMessage
	RNGState        []byte
	Position        Position
	Build           string // build identity of the writer
	// MixedPrecision is the writer's compute mode when it is not float32 ("bf16"); "" is f32,
	// so a float32 run's record is what it was before modes existed. The state is float32 in
	// every mode: a reader explains a difference rather than refusing it.
	MixedPrecision string
	// Accum is the writer's micro-batches per optimizer step when more than 1; 0 is 1, so a run
	// without accumulation writes what it wrote before the field existed. A resume must continue
	// with the same value: the step count and the schedules' position are in optimizer steps.
	Accum int
	// Control is the caller's run-control state, opaque here (core stores its early-stopping
	// state under it), so that a resume restores what decides when the run stops.
	Control json.RawMessage
}

// Tensor returns the tensor with this name.
func (r *Record) Tensor(name string) (Tensor, bool) {
	for _, t := range r.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// recordFormat is the version of the file's nitro layout and of the "nitro.record" JSON; a
// reader refuses any other. Version 2 put the header under its own checksum.
const recordFormat = 2

// recordMeta is everything in a Record but its tensors, as stored under "nitro.record".
type recordMeta struct {
	Format          int               `json:"format"`
	Epoch           int               `json:"epoch"`
	Step            int               `json:"step"`
	Metrics         metricMap         `json:"metrics,omitempty"`
	StopReason      runstatus.Status  `json:"stop_reason,omitempty"`
	Preset          string            `json:"preset,omitempty"`
	RunID           string            `json:"run_id,omitempty"`
	RunURL          string            `json:"run_url,omitempty"`
	Values          Values            `json:"values"`
	Derived         map[string]string `json:"derived,omitempty"`
	AnchorChecksums map[string]string `json:"anchor_checksums,omitempty"`
	LoggerType      string            `json:"logger_type,omitempty"`
	LoggerState     json.RawMessage   `json:"logger_state,omitempty"`
	RNGState        []byte            `json:"rng_state,omitempty"`
	Position        Position          `json:"position"`
	Build           string            `json:"build,omitempty"`
	MixedPrecision  string            `json:"mixed_precision,omitempty"`
	Accum           int               `json:"accum,omitempty"`
	Control         json.RawMessage   `json:"control,omitempty"`
}

func metaOf(r *Record) recordMeta {
	return recordMeta{
		Format: recordFormat, Epoch: r.Epoch, Step: r.Step, Metrics: r.Metrics,
		StopReason: r.StopReason, Preset: r.Preset, RunID: r.RunID, RunURL: r.RunURL,
		Values: r.Values, Derived: r.Derived, AnchorChecksums: r.AnchorChecksums,
		LoggerType: r.LoggerType, LoggerState: r.LoggerState, RNGState: r.RNGState,
		Position: r.Position, Build: r.Build, Control: r.Control, MixedPrecision: r.MixedPrecision,
		Accum: r.Accum,
	}
}

func (m *recordMeta) apply(r *Record) {
	r.Epoch, r.Step, r.Metrics = m.Epoch, m.Step, m.Metrics
	r.StopReason, r.Preset, r.RunID, r.RunURL = m.StopReason, m.Preset, m.RunID, m.RunURL
	r.Values, r.Derived, r.AnchorChecksums = m.Values, m.Derived, m.AnchorChecksums
	r.LoggerType, r.LoggerState, r.RNGState = m.LoggerType, m.LoggerState, m.RNGState
	r.Position, r.Build, r.Control, r.MixedPrecision = m.Position, m.Build, m.Control, m.MixedPrecision
	r.Accum = m.Accum
}

// metricMap encodes finite values as JSON numbers (shortest form, exact round trip) and the
// non-finite ones as the strings "NaN", "+Inf" and "-Inf", which plain JSON cannot carry.
type metricMap map[string]float64

func (m metricMap) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(out, kb...)
		out = append(out, ':')
		v := m[k]
		switch {
		case math.IsNaN(v):
			out = append(out, `"NaN"`...)
		case math.IsInf(v, 1):
			out = append(out, `"+Inf"`...)
		case math.IsInf(v, -1):
			out = append(out, `"-Inf"`...)
		default:
			out = strconv.AppendFloat(out, v, 'g', -1, 64)
		}
	}
	return append(out, '}'), nil
}

func (m *metricMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*m = nil
		return nil
	}
	out := make(metricMap, len(raw))
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			switch s {
			case "NaN":
				out[k] = math.NaN()
			case "+Inf":
				out[k] = math.Inf(1)
			case "-Inf":
				out[k] = math.Inf(-1)
			default:
				return fmt.Errorf("metric %q: %q is neither a number nor NaN/+Inf/-Inf", k, s)
			}
			continue
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return fmt.Errorf("metric %q: %w", k, err)
		}
		out[k] = f
	}
	*m = out
	return nil
}
