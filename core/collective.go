package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// Collective is what a run of several processes does across them: every process calls the
// same operations in the same order with buffers of the same length, and each call returns when
// all have made it. Package collective's Local (in-memory, for tests) and package mpi's Comm
// (Open MPI, under mpirun) implement it.
type Collective interface {
	engine.AllReducer                     // AllReduceSum(float32) in place; Size
	AllReduceSum64(buf []float64) error   // the same over float64 (validation accumulators)
	Broadcast(buf []byte, root int) error // rank root's bytes into every rank's buf
	Rank() int                            // this process, in [0, Size())
}

// WithCollective trains this process as one rank of a data-parallel run over several processes
// (WithDist gives its rank and world size, which c must agree with). Each step's gradients are
// summed over the processes between the gradient and the optimizer program and divided by the
// world size: the global batch is the world size times each process's batch, and the result is
// what one process on that many devices computes with that global batch (engine/allreduce.go).
// Validation's (sum, count) accumulators are summed before they are finalized, so every rank
// sees the same metrics and takes the same early-stopping decision; at setup the ranks compare
// what they are about to run and refuse a difference. A plain BuildData's splits (and WithData's)
// are sharded here: train with dist.Shard (batches), the others with dist.ShardEval (each rank a
// share of every batch's samples, so any rank count evaluates every sample once). The fused and the
// manual step are refused (one program: no point for the sum).
func WithCollective(c Collective) Option { return func(o *options) { o.collective = c } }

// WithIndependentRanks lets the processes of a launch that share no collective each train a
// model of their own on the data their experiment builds (a sweep's trials, say), of which only
// rank 0's is written. Without it New refuses such a launch: a user who launched several
// processes to train one model would pay for all of them and get one model trained on a share
// of the compute they meant, in a result that looks normal. On the CUDA plugin it keeps the
// processes from spanning one client; with a collective of several processes (WithCollective,
// mpirun) it is refused, since the ranks would train one model after all.
func WithIndependentRanks() Option { return func(o *options) { o.independent = true } }

// multi is the run's collective when it spans more than one process, else nil.
func (su *runSpec) multi() Collective {
	if c := su.opts.collective; c != nil && c.Size() > 1 {
		return c
	}
	return nil
}

// checkCollective is setup's collective phase: the collective's rank and size are WithDist's.
// Its warning for ranks with no collective comes with the backend (spanCollective).
func (bld *builder) checkCollective() error {
	n := bld.n
	c := n.spec.opts.collective
	if c == nil {
		return nil // the backend's client may span the processes (spanCollective)
	}
	if n.spec.opts.independent && c.Size() > 1 {
		return fmt.Errorf("WithIndependentRanks (--independent-ranks) with a collective over %d processes (%s): the ranks would train one model, not independent ones; drop one of them", c.Size(), collectiveVia(c))
	}
	if d := n.Dist(); c.Size() != d.WorldSize || c.Rank() != d.Rank {
		return fmt.Errorf("WithCollective: the collective is rank %d of %d, WithDist says %s: pass the launcher's Dist (dist.FromEnv) to both", c.Rank(), c.Size(), d)
	}
	return nil
}

// spanCollective is the backend phase's last step: a run of several processes with no collective
// of its own whose backend's client spans them (the CUDA plugin started under the launcher's
// rank and world size) takes that client as its collective, so the gradients, the validation
// sums, the agreement and the stop votes cross the processes on the device (backend.XProcess),
// and the run trains one model. A client that does not span them is refused there.
func (bld *builder) spanCollective() error {
	su := &bld.n.spec
	d := distOf(su.opts)
	if su.opts.collective != nil || d.WorldSize <= 1 {
		return nil
	}
	if su.backend.Name == backend.CUDA && !su.opts.independent {
		x, err := backend.NewXProcess(su.backend, d.Rank, d.WorldSize)
		if err != nil {
			return fmt.Errorf("%s on the CUDA plugin: %w", d, err)
		}
		su.opts.collective = x
		return nil
	}
	// Ranks that share no collective train one model each: refused unless asked for by name, and
	// then said once more, since only rank 0's model is written.
	launcher := d.Source
	if launcher == dist.SourceNone {
		launcher = "core.WithDist (no launcher variable)"
	}
	if !su.opts.independent {
		return fmt.Errorf("%s, launched by %s, has no collective to train one model with: each process would train its own model and only rank 0's would be written. "+
			"For one model over all processes, launch under mpirun (Open MPI: nitro train sums the gradients over MPI), or with srun --mpi=pmix over Open MPI, or on the CUDA plugin on GPU hosts, or pass core.WithCollective; "+
			"to train independent models on purpose (a sweep's trials), pass --independent-ranks (core.WithIndependentRanks) (docs/multihost.md)", d, launcher)
	}
	su.warn(fmt.Sprintf("%s with no collective (--independent-ranks): each process trains its own model on the data its experiment builds (all of it, unless the experiment shards by its Dist) and only rank 0's is written", d))
	return nil
}

// collectiveVia names the run's collective in the config report: its own words when it has them.
func collectiveVia(c Collective) string {
	if v, ok := c.(interface{ Via() string }); ok {
		return v.Via()
	}
	return "WithCollective"
}

// shardForCollective shards data the experiment did not shard itself, under a collective.
func (bld *builder) shardForCollective(data prefetch.Data) (prefetch.Data, error) {
	su := &bld.n.spec
	if su.multi() == nil {
		return data, nil
	}
	d := distOf(su.opts)
	out := make(prefetch.Data, len(data))
	for name, src := range data {
		shard := dist.ShardEval
		if name == "train" {
			shard = dist.Shard
		}
		s, err := shard(src, d)
		if err != nil {
			return nil, fmt.Errorf("WithCollective: split %q: %w", name, err)
		}
		out[name] = s
	}
	su.sharded = true
	return out, nil
}

// reduceSplit sums a split's accumulators over the processes before they are finalized.
func (su *runSpec) reduceSplit(acc *metrics.Accumulator, split string) error {
	c := su.multi()
	if c == nil {
		return nil
	}
	if err := acc.Reduce(c.Size(), c.AllReduceSum64); err != nil {
		return fmt.Errorf("split %q over %d processes: %w", split, c.Size(), err)
	}
	return nil
}

// agree is setup's agreement phase: the ranks compare what they are about to run (the
// experiment type, every field's value and knob as the params line records them, the world
// size, the backend and plugin, the local devices) by a hash of it from rank 0. When any rank
// differs, the first such rank's description and rank 0's are broadcast, and every rank refuses
// with the same error naming the first differing field and both values: two ranks launched with
// different settings must never train two models into one record.
func (bld *builder) agree() error {
	n := bld.n
	c := n.spec.multi()
	if c == nil {
		return nil
	}
	desc := bld.runDescription()
	h := sha256.Sum256(desc)
	root := h
	if err := c.Broadcast(root[:], 0); err != nil {
		return fmt.Errorf("WithCollective: comparing the ranks' runs: %w", err)
	}
	differs := make([]float64, c.Size())
	if root != h {
		differs[c.Rank()] = 1
	}
	if err := c.AllReduceSum64(differs); err != nil {
		return fmt.Errorf("WithCollective: comparing the ranks' runs: %w", err)
	}
	first := slices.IndexFunc(differs, func(v float64) bool { return v != 0 })
	if first < 0 {
		return nil
	}
	theirs, err := broadcastBytes(c, desc, 0)
	if err == nil {
		var other []byte
		other, err = broadcastBytes(c, desc, first)
		if err == nil {
			return disagreement(theirs, other, first)
		}
	}
	return fmt.Errorf("WithCollective: rank %d runs something else than rank 0, and reading what: %w", first, err)
}

// runDescription is this rank's run, one "name=value" line per field, sorted.
func (bld *builder) runDescription() []byte {
	n := bld.n
	p := n.spec.runParams()
	p["experiment"] = n.spec.typeName
	p["world_size"] = n.Dist().WorldSize
	p["backend"] = n.spec.backend.Name
	p["plugin"] = pluginIdentity(n.spec.backend.Plugin)
	p["devices"] = n.spec.devs.n.value
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(p)) {
		v, err := json.Marshal(p[k])
		if err != nil {
			v = fmt.Appendf(nil, "%#v", p[k])
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return b.Bytes()
}

// pluginIdentity is the plugin file's name and size: hosts install it at different paths, so the
// path would refuse ranks that run the same plugin, while another version is another size.
func pluginIdentity(path string) string {
	if path == "" {
		return ""
	}
	if fi, err := os.Stat(path); err == nil {
		return fmt.Sprintf("%s (%d bytes)", filepath.Base(path), fi.Size())
	}
	return filepath.Base(path)
}

// broadcastBytes is root's mine on every rank: its length first, then its bytes.
func broadcastBytes(c Collective, mine []byte, root int) ([]byte, error) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(mine)))
	if err := c.Broadcast(n[:], root); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.LittleEndian.Uint64(n[:]))
	copy(buf, mine)
	return buf, c.Broadcast(buf, root)
}

// disagreement names the first line where rank r's description differs from rank 0's.
func disagreement(zero, other []byte, r int) error {
	field := func(lines map[string]string, k string) string {
		if v, ok := lines[k]; ok {
			return v
		}
		return "(absent)"
	}
	a, b := descLines(zero), descLines(other)
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if field(a, k) != field(b, k) {
			return fmt.Errorf("WithCollective: rank 0 and rank %d would run different things: %s is %s on rank 0 and %s on rank %d; launch every rank with the same experiment, preset and --set values", r, k, field(a, k), field(b, k), r)
		}
	}
	return fmt.Errorf("WithCollective: rank 0 and rank %d would run different things (their descriptions hash differently, line for line equal)", r)
}

func descLines(desc []byte) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(desc), "\n"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

// reducer is the engine's AllReducer: the collective when the run spans processes, else nil (a
// nil Collective in an interface would not be nil).
func (bld *builder) reducer() engine.AllReducer {
	su := &bld.n.spec
	if c := su.multi(); c != nil {
		return c
	}
	return nil
}

// worldSizeKey is where a record's control state keeps the world size of a run of more than one
// process (absent: one).
const worldSizeKey = "world_size"

// recordWorldSize adds the world size to a record's control state when the run spans processes.
func (n *Nitro) recordWorldSize(control json.RawMessage) (json.RawMessage, error) {
	w := n.Dist().WorldSize
	if w == 1 {
		return control, nil
	}
	ctl := map[string]json.RawMessage{}
	if len(control) > 0 {
		if err := json.Unmarshal(control, &ctl); err != nil {
			return nil, err
		}
	}
	ctl[worldSizeKey] = json.RawMessage(strconv.Itoa(w))
	return json.Marshal(ctl)
}

// recordedWorldSize is the world size a record's control state names (absent: one).
func recordedWorldSize(ctl map[string]json.RawMessage, path string) (int, error) {
	recorded := 1
	if raw, ok := ctl[worldSizeKey]; ok {
		if err := json.Unmarshal(raw, &recorded); err != nil || recorded < 1 {
			return 0, fmt.Errorf("checkpoint %s: control state: %s is %s: want an integer >= 1", path, worldSizeKey, raw)
		}
	}
	return recorded, nil
}

// globalBatch is the samples one train batch index takes over every process (the world size
// times this process's batch), when the processes' batches i make one global batch i of a
// single order: one process, or train data core sharded itself (dist.Shard's strides). 0 when
// the experiment sharded its own (BuildData(d dist.Dist)) or the processes share no collective.
func (n *Nitro) globalBatch() int {
	if _, ok := n.spec.data["train"]; !ok || (n.Dist().WorldSize > 1 && !n.spec.sharded) {
		return 0
	}
	return n.Dist().WorldSize * n.spec.trainWidth
}

// recordPosition is the data position as a record keeps it: in global batches when the run
// has them (globalBatch), so that another world size or batch size can resume it.
func (n *Nitro) recordPosition() checkpoint.Position {
	p := checkpoint.Position{Epoch: n.st.data.epoch, Batch: n.st.data.batch}
	if g := n.globalBatch(); g > 0 {
		p.GlobalBatch, p.EpochBatches = g, n.spec.data["train"].Len()
	}
	return p
}

// resumePosition is the record's data position in this run's batches. The same world size and
// global batch take it as written (a record from before global positions included). Another
// world size or global batch maps the record's consumed samples onto this run's batches
// (checkpoint.Position.Rebatch), exactly or not at all; a position counted in one process's
// shard batches cannot be mapped, and is refused under another world size. A weights-only load
// (WithCheckpoint) takes no position and is not refused.
func (bld *builder) resumePosition(rec *checkpoint.Record, ctl map[string]json.RawMessage, path string) (dataPosition, error) {
	n := bld.n
	recorded, err := recordedWorldSize(ctl, path)
	if err != nil {
		return dataPosition{}, err
	}
	p, w, g := rec.Position, n.Dist().WorldSize, n.globalBatch()
	if p.Global() && p.GlobalBatch%recorded != 0 {
		return dataPosition{}, fmt.Errorf("checkpoint %s: position.global_batch %d is not a multiple of the %d processes (control state %s) that wrote it: the record is damaged", path, p.GlobalBatch, recorded, worldSizeKey)
	}
	switch {
	case w == recorded && !p.Global():
		// A shard position records no batch width, so a changed batch size cannot be mapped;
		// one that leaves the position past this run's epoch is at least refused.
		if train, ok := n.spec.data["train"]; ok && p.Batch > train.Len() {
			return dataPosition{}, fmt.Errorf("checkpoint %s: position.batch %d is past this run's epoch of %d train batches: the record counts batches of the size that wrote it (no position.global_batch), and the train batch size or split changed since; resume with the recorded ones, or load its weights alone (WithCheckpoint, --weights-only)", path, p.Batch, train.Len())
		}
		return dataPosition{epoch: p.Epoch, batch: p.Batch}, nil
	case w == recorded && p.GlobalBatch == g:
		return dataPosition{epoch: p.Epoch, batch: p.Batch}, nil
	case !p.Global():
		return dataPosition{}, fmt.Errorf("checkpoint %s was written by a run of %d process(es) and this run has %d: its data position counts each rank's shard batches (no position.global_batch: written by an older nitro, or by a run whose BuildData(d dist.Dist) shards its own data), which name other samples under another world size; resume with %d, or load its weights alone (WithCheckpoint, --weights-only)", path, recorded, w, recorded)
	case g == 0:
		return dataPosition{}, fmt.Errorf("checkpoint %s was written by a run of %d process(es) and this run of %d shards its data itself (BuildData(d dist.Dist)) or has no collective: its global data position cannot be placed in this run's shards; resume with %d process(es), let core shard the data (BuildData() under WithCollective), or load its weights alone (WithCheckpoint, --weights-only)", path, recorded, w, recorded)
	}
	train := n.spec.data["train"]
	if was := p.GlobalBatch / recorded; was != n.spec.trainWidth && !prefetch.OrdersSamples(train) {
		return dataPosition{}, fmt.Errorf("resume from %s: each process's train batch was %d samples and is %d now, and the train split's source (%T) does not say that its batch i of width B is samples iB to iB+B-1 of one order whatever B is (prefetch.SampleOrderer), so the recorded position names no sample of this run; resume with a train batch of %d per process, or give the source a SampleOrdered() bool method when that holds",
			path, was, n.spec.trainWidth, train, was)
	}
	q, err := p.Rebatch(g, train.Len(), n.spec.cfg.accum.value)
	if err != nil {
		return dataPosition{}, fmt.Errorf("resume from %s (written by %d process(es), global batch %d; this run: %d process(es) x batch %d): %w", path, recorded, p.GlobalBatch, w, n.spec.trainWidth, err)
	}
	if p.GlobalBatch != g {
		n.spec.notice(fmt.Sprintf("resume: the global batch was %d samples and is %d now (%d process(es) x batch %d): steps per epoch change with it", p.GlobalBatch, g, w, n.spec.trainWidth))
	}
	n.spec.notice(fmt.Sprintf("resume: data position of %d process(es), epoch %d batch %d of %d samples, is batch %d of %d samples over %d process(es)", recorded, p.Epoch, p.Batch, p.GlobalBatch, q.Batch, g, w))
	return dataPosition{epoch: q.Epoch, batch: q.Batch}, nil
}

// stepInterrupted is whether the epoch stops at this step boundary for an Interrupt. One process
// reads its own flag. Over several, every rank must stop at the same step (one that stopped alone
// would leave the others waiting in the next step's sum), so the step's vote decides, and a rank
// that learns of another's Interrupt takes it as its own; one that arrives here after its vote was
// taken counts at the next step.
func (n *Nitro) stepInterrupted(voted bool) bool {
	if n.spec.multi() == nil {
		return n.interrupted.Load()
	}
	if voted && !n.interrupted.Load() {
		n.Interrupt()
	}
	return voted
}

// agreeStop is the epoch's stop request over every rank: one process's own, or over several
// whether any rank's tracker was asked to stop (a monitor, RequestStop), so that all end after the
// same epoch.
func (n *Nitro) agreeStop(mine bool) (bool, error) {
	c := n.spec.multi()
	if c == nil {
		return mine, nil
	}
	v := []float64{0}
	if mine {
		v[0] = 1
	}
	if err := c.AllReduceSum64(v); err != nil {
		return false, fmt.Errorf("agreeing on the stop over %d processes: %w", c.Size(), err)
	}
	return v[0] > 0, nil
}
