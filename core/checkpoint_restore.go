package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/tensorfile"
)

// Resume (WithResume) and a new run from a checkpoint's weights (WithCheckpoint): find the
// checkpoint, check it fits the config and the model, then install it all or nothing.

// loadRecord reads a checkpoint through the checkpointer (Load dispatches on it), else from the
// file; a directory means its newest checkpoint by the manifest.
func (bld *builder) loadRecord(path string) (*checkpoint.Record, string, error) {
	n := bld.n
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		p, err := NewestCheckpoint(path)
		if err != nil {
			return nil, "", err
		}
		path = p
	}
	var rec *checkpoint.Record
	var err error
	if n.ck.c != nil {
		rec, err = n.ck.c.Load(path)
	} else {
		rec, err = checkpoint.Read(path)
	}
	return rec, path, err
}

// sourceOf hashes the checkpoint file just read, for the provenance of what is exported later:
// the bytes are hashed now, while the file is the one restored (a run directory's newest changes
// as it trains, and retention removes old files). The file's size and modification time must be
// the same before and after the hash, else it was replaced while it was read and the hash could
// name other bytes than the restored ones. A checkpointer on another file system than the
// operating system's (an in-memory one in tests) leaves the hash empty: the file cannot be
// reopened here, and the provenance then names the file alone.
func (bld *builder) sourceOf(arg, path string, resumed bool) (*ckptSource, error) {
	n := bld.n
	src := &ckptSource{arg: arg, path: path, resumed: resumed}
	before, err := os.Stat(path)
	if err != nil {
		if n.ck.c != nil && errors.Is(err, os.ErrNotExist) {
			return src, nil // the checkpointer read it through a file system of its own
		}
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	f, _, err := tensorfile.OpenRegular(path) // a FIFO swapped in since the read is refused, not waited on
	if err != nil {
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		return nil, fmt.Errorf("checkpoint %s changed while it was read (size %d -> %d, modified %v -> %v): restore from a checkpoint no writer is replacing", path, before.Size(), after.Size(), before.ModTime(), after.ModTime())
	}
	src.sha256 = hex.EncodeToString(h.Sum(nil))
	return src, nil
}

// NewestCheckpoint is the path of the newest checkpoint a run directory's manifest lists; an
// error names the directory when it has none, and the file and the older checkpoints when the
// newest is missing or not a file (a *checkpoint.NewestError).
func NewestCheckpoint(dir string) (string, error) {
	p, ok, err := checkpoint.Newest(dir)
	if err != nil {
		return "", err
	}
	if !ok {
		if listedIn(dir) {
			return "", fmt.Errorf("%s is a directory, and its run dir's %s lists it as a checkpoint file: the file was replaced; pass another checkpoint (nitro ls %s)", dir, checkpoint.ManifestName, filepath.Dir(dir))
		}
		return "", fmt.Errorf("%s holds no checkpoint (no %s listing one)", dir, checkpoint.ManifestName)
	}
	return p, nil
}

// listedIn reports whether the manifest beside path lists it as a checkpoint.
func listedIn(path string) bool {
	entries, _ := checkpoint.ReadManifest(filepath.Dir(path))
	return slices.ContainsFunc(entries, func(e checkpoint.ManifestEntry) bool { return e.File == filepath.Base(path) })
}

// withOlderHint adds how to use one of the older checkpoints a *checkpoint.NewestError names:
// by path, to a resume (resume) or to WithCheckpoint.
func withOlderHint(err error, resume bool) error {
	var ne *checkpoint.NewestError
	if !errors.As(err, &ne) || len(ne.Older) == 0 {
		return err
	}
	if resume {
		return fmt.Errorf("%w: resume from one with --resume PATH (core.WithResume(PATH))", err)
	}
	return fmt.Errorf("%w: load one with --checkpoint PATH (core.WithCheckpoint(PATH))", err)
}

// resume is WithResume: find the checkpoint, check it fits, restore everything.
func (bld *builder) resume(from string) error {
	n := bld.n
	path := from
	if from == ResumeAuto {
		if n.ck.c == nil {
			return errors.New(`WithResume("auto") finds the newest checkpoint through the checkpointer, and checkpointing is off (WithoutCheckpoints): pass a checkpoint's path, or a checkpointer`)
		}
		p, ok, err := n.ck.c.Latest()
		if err != nil {
			return fmt.Errorf("resume auto: %w", withOlderHint(err, true))
		}
		if !ok {
			where := n.RunDir()
			if d, isDir := n.ck.c.(checkpoint.InDir); isDir {
				where = d.Dir()
			}
			if err := bld.checkResumeDir(""); err != nil {
				return err
			}
			n.spec.notice(fmt.Sprintf("resume auto: no checkpoint in %s; starting a fresh run", where))
			return nil
		}
		path = p
	}
	rec, path, err := bld.loadRecord(path)
	if err != nil {
		return fmt.Errorf("resume: %w", withOlderHint(err, true))
	}
	if err := bld.checkResumeDir(path); err != nil {
		return err
	}
	if err := bld.checkCompatible(rec, path); err != nil {
		return err
	}
	src, err := bld.sourceOf(from, path, true)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := bld.restore(rec, path, true); err != nil {
		return err
	}
	n.ck.last, n.ck.source = path, src
	n.spec.notice(fmt.Sprintf("resumed from %s: epoch %d, step %d", path, rec.Epoch, rec.Step))
	if rec.StopReason == StopEarly {
		if n.ck.es != nil && n.ck.es.stillStopped() {
			n.ck.stopped = path
		} else {
			n.spec.notice(fmt.Sprintf("the checkpoint records an early stop at epoch %d; the early stopping configured now does not stop there, so training goes on", rec.Epoch))
		}
	}
	return nil
}

// loadWeights is WithCheckpoint: the parameters and layer state, nothing of the run's progress.
func (bld *builder) loadWeights(path string) error {
	n := bld.n
	arg := path
	rec, path, err := bld.loadRecord(path)
	if err != nil {
		return fmt.Errorf("WithCheckpoint: %w", withOlderHint(err, false))
	}
	for _, d := range checkpoint.DiffValues(rec.Values.GraphConst, n.spec.recordValues().GraphConst) {
		n.spec.notice("checkpoint " + path + ": GraphConst " + d)
	}
	src, err := bld.sourceOf(arg, path, false)
	if err != nil {
		return fmt.Errorf("WithCheckpoint: %w", err)
	}
	if err := bld.restore(rec, path, false); err != nil {
		return err
	}
	n.ck.source = src
	n.ck.weightsAt = &[2]int{rec.Epoch, rec.Step}
	n.spec.notice(fmt.Sprintf("weights from %s (epoch %d, step %d); training from them starts a fresh optimizer and fresh counters", path, rec.Epoch, rec.Step))
	return nil
}

// checkCompatible is the config half of a resume: GraphConst fields must equal the record's (they
// bake into the programs, so a change would train another program), anchored groups must decay
// toward the same anchor; Device, Host and derived changes are allowed and reported.
func (bld *builder) checkCompatible(rec *checkpoint.Record, path string) error {
	n := bld.n
	notes, err := checkpoint.CheckConfigCompatible(path, rec.Values, n.spec.recordValues())
	if err != nil {
		return err
	}
	anchors, err := n.anchorChecksums()
	if err != nil {
		return err
	}
	for _, g := range sortedKeys(rec.AnchorChecksums) {
		if got, ok := anchors[g]; ok && got != rec.AnchorChecksums[g] {
			return fmt.Errorf("resume from %s refused: group %q decays toward its initial weights (w0), and BuildModel's weights now differ from the checkpointed run's (anchor checksum %s, was %s): the resumed run would decay toward another point; make BuildModel deterministic (same Seed, same pretrained weights) or start a new run",
				path, g, got, rec.AnchorChecksums[g])
		}
	}
	if was := max(rec.Accum, 1); was != n.spec.cfg.accum.value {
		return fmt.Errorf("resume from %s refused: its run stepped the optimizer every %d micro-batches (Accum %d), this one has Accum = %d (from %s): the step count, the schedules' position and the data position are counted in those steps, so the resumed run would not continue that one; resume with Accum %d (core.WithAccum, --accum %d), or start a new run from its weights (WithCheckpoint, --weights-only)",
			path, was, was, n.spec.cfg.accum.value, n.spec.cfg.accum.source, was, was)
	}
	bld.checkPrecisionOnResume(rec, path)
	for _, d := range append(notes, prefixed("derived ", checkpoint.DiffValues(rec.Derived, n.spec.derived))...) {
		n.spec.notice("resume: " + d)
	}
	return nil
}

func prefixed(p string, lines []string) []string {
	for i := range lines {
		lines[i] = p + lines[i]
	}
	return lines
}

// restore installs a record into the training state, all or nothing: every tensor is checked
// and uploaded (counted in Uploads) before any replaces the state. full is a resume: parameters,
// optimizer and layer state, step, epoch, data position, logger and early-stopping state. Else
// the weights: parameters and layer state but the RNG state, the counters left as they are.
func (bld *builder) restore(rec *checkpoint.Record, path string, full bool) error {
	n := bld.n
	part := engine.WeightsPart
	if full {
		part = engine.WholePart
	}
	staged, err := n.eng.StageState(rec.Tensors, part, path)
	if err != nil {
		return err
	}
	var at dataPosition
	if full {
		if at, err = bld.restoreProgress(rec, path); err != nil {
			return err
		}
	}
	if err := n.eng.InstallState(staged, path); err != nil {
		return err
	}
	if full {
		n.st.step, n.st.epoch = rec.Step, rec.Epoch
		n.st.data = at
	}
	return nil
}

// restoreProgress is what a resume takes back besides the tensors: the control state (checked on
// every resume, early stopping on or off: a record whose control does not parse is damaged,
// whatever part of it this run would use), early stopping's progress, the logger's state, and
// the data position in this run's batches.
func (bld *builder) restoreProgress(rec *checkpoint.Record, path string) (dataPosition, error) {
	n := bld.n
	var ctl map[string]json.RawMessage
	if len(rec.Control) > 0 {
		if err := json.Unmarshal(rec.Control, &ctl); err != nil {
			return dataPosition{}, fmt.Errorf("checkpoint %s: control state: %w", path, err)
		}
	}
	at, err := bld.resumePosition(rec, ctl, path) // collective.go
	if err != nil {
		return dataPosition{}, err
	}
	if err := bld.checkHorizon(ctl, path); err != nil { // periods.go
		return dataPosition{}, err
	}
	if n.ck.es != nil {
		// Resume runs only in New, so a failure after this leaves no Nitro behind to hold a
		// half-restored policy.
		if err := bld.restoreEarlyStop(rec.Control, path); err != nil {
			return dataPosition{}, err
		}
	}
	if n.log.l != nil {
		if err := logjson.Reattach(n.log.l, rec.LoggerType, rec.LoggerState); err != nil {
			return dataPosition{}, fmt.Errorf("resume from %s: %w", path, err)
		}
	}
	return at, nil
}
