package core

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/logjson"
)

// CheckRunDir proves that dir can hold a run's files: it creates dir (and missing parents),
// writes and removes a probe file, then removes the folders it created, so that a run dir that is
// a file, lies under a file, or is not writable fails when the run is set up rather than at its
// first checkpoint, after the data, the compiles and a whole epoch. The error says why.
func CheckRunDir(dir string) error {
	if dir == "" {
		return errors.New("empty path")
	}
	// The missing folders, deepest first, to remove again: the probe leaves nothing behind, and
	// the logger or checkpointer creates the folder when it first writes.
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	defer func() {
		for _, d := range created {
			os.Remove(d) // only empty folders go; one something else filled meanwhile stays
		}
	}()
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create it: %w", err)
	}
	f, err := os.CreateTemp(dir, ".nitro-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write in it: %w", err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("nitro"))
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("cannot write in it: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("cannot remove a file from it: %w", rerr)
	}
	return nil
}

// WithOverwrite starts a fresh run in a run dir that holds an earlier run, which New otherwise
// refuses: once the run is set up, before its first record, it removes what nitro wrote there
// (metrics.jsonl, the checkpoints manifest.json lists, the manifest, the TensorBoard event files
// in tb/) and says so as a notice;
// every other file stays. With WithResume, which continues that run, New refuses it.
func WithOverwrite() Option { return func(o *options) { o.overwrite = true } }

// writesRunDir reports whether something this run sets up writes into the run dir: the default
// checkpointer (TopK adopts the run dir) or a logger that keeps files there (a JSON Lines logger
// with no path of its own, pinned to <run dir>/metrics.jsonl; any other logjson.RunDirUser). A checkpointer given by option or by the experiment's
// Checkpointer hook may write elsewhere, through a file system of its own, so it does not count.
// A rank other than 0 writes nothing there (dist.go).
func (n *Nitro) writesRunDir() bool {
	o := n.spec.opts
	_, chooses := n.spec.e.(CheckpointerChooser)
	writes := !o.ckptSet && !chooses
	l := n.log.l // the option's, the experiment's or the default (newRunLog)
	if jls := jsonLoggers(l); len(jls) > 0 {
		for _, jl := range jls {
			writes = writes || jl.Path() == ""
		}
	} else if _, ok := l.(logjson.RunDirUser); ok {
		writes = true // it keeps files in the run dir unless given a place: count it
	}
	return writes && n.Dist().IsRank0()
}

// checkRunDir runs CheckRunDir at setup when this run writes into the run dir, and refuses a
// fresh run into a run dir that holds an earlier run (heldRun): the two would share one
// metrics.jsonl and one top-K ranking, so the record, the plots and the "best checkpoint" would
// mix two models. A resume is checked where it finds its checkpoint (checkResumeDir).
func (bld *builder) checkRunDir() error {
	n := bld.n
	o := n.spec.opts
	if o.overwrite && o.resume != "" {
		return fmt.Errorf("WithOverwrite with WithResume(%q): WithOverwrite discards the run dir's earlier run and WithResume continues one; drop one of them", o.resume)
	}
	if !n.writesRunDir() {
		return nil
	}
	dir := n.spec.cfg.runDir
	if err := CheckRunDir(dir.value); err != nil {
		return fmt.Errorf("RunDir %q (from %s): %w; the run's metrics.jsonl and checkpoints go there: point it at a writable directory (core.WithRunDir, or the experiment's RunDir), or turn off what writes there (WithoutLogger, WithoutCheckpoints)", dir.value, dir.source, err)
	}
	if o.resume != "" {
		return nil
	}
	held, _, err := heldRun(dir.value)
	if err != nil {
		return err
	}
	if o.overwrite && held != "" {
		n.spec.overwriteDue = true
		return nil
	}
	if held == "" {
		return nil
	}
	return fmt.Errorf("RunDir %q (from %s) already holds a run (%s), and this is a fresh run: the two would share one metrics.jsonl and one top-K checkpoint ranking, so the record, its plots and the best checkpoint would mix two models; continue that run (core.WithResume(core.ResumeAuto), nitro train --resume auto), choose another run dir (core.WithRunDir, --run-dir), or discard it and start afresh (core.WithOverwrite(), nitro train --overwrite)",
		dir.value, dir.source, held)
}

// checkResumeDir is the resume's half of checkRunDir, once the checkpoint is found: file is the
// checkpoint it continues ("" when WithResume(ResumeAuto) found none, a fresh run). Continuing
// the run in its own folder (the run dir, or the checkpointer's) is what a resume is for; a run
// dir elsewhere, or a fresh run, must not hold an earlier run.
func (bld *builder) checkResumeDir(file string) error {
	n := bld.n
	if !n.writesRunDir() {
		return nil
	}
	dir := n.spec.cfg.runDir
	if file != "" {
		from := filepath.Dir(file)
		if sameDir(from, dir.value) {
			return nil
		}
		if d, ok := n.ck.c.(checkpoint.InDir); ok && sameDir(from, d.Dir()) {
			return nil
		}
	}
	held, checkpoints, err := heldRun(dir.value)
	if err != nil || held == "" {
		return err
	}
	if file == "" {
		if checkpoints == 0 {
			// A record or TensorBoard events and no checkpoint: a run stopped before its first
			// checkpoint (a kill, a crash). Nothing can be continued, so "auto" starts afresh,
			// and the earlier record and events are kept beside the new ones (archiveAttempt),
			// so that a supervisor restarting with --resume auto always makes progress and loses
			// nothing.
			n.spec.archiveDue = true
			return nil
		}
		return fmt.Errorf("resume auto: no checkpoint to continue, and RunDir %q (from %s) holds an earlier run (%s): a fresh run there would share its top-K ranking, mixing two models; choose another run dir (core.WithRunDir, --run-dir), or discard it and start afresh without the resume (core.WithOverwrite(), nitro train --overwrite)",
			dir.value, dir.source, held)
	}
	return fmt.Errorf("resume from %s into RunDir %q (from %s): that run dir holds another run (%s), and the continued run would share its metrics.jsonl and its top-K checkpoint ranking, mixing two models; continue in the checkpoint's own folder (core.WithRunDir(%q), or leave --run-dir out), or choose an empty run dir",
		file, dir.value, dir.source, held, filepath.Dir(file))
}

// heldRun says what an earlier run left in dir ("" for nothing): the checkpoints its manifest
// lists (also counted), a non-empty metrics.jsonl and the TensorBoard event files in tb/, e.g.
// "3 checkpoints, a 12.3 kB metrics.jsonl, 2 TensorBoard event files in tb/".
func heldRun(dir string) (held string, checkpoints int, err error) {
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil {
		return "", 0, fmt.Errorf("RunDir %q: cannot tell whether it holds an earlier run: %w", dir, err)
	}
	var parts []string
	switch len(entries) {
	case 0:
	case 1:
		parts = append(parts, "1 checkpoint")
	default:
		parts = append(parts, fmt.Sprintf("%d checkpoints", len(entries)))
	}
	if fi, err := os.Stat(filepath.Join(dir, MetricsFile)); err == nil && fi.Size() > 0 {
		parts = append(parts, "a "+byteSize(fi.Size())+" "+MetricsFile)
	}
	switch events := len(eventFiles(dir)); events {
	case 0:
	case 1:
		parts = append(parts, "1 TensorBoard event file in "+tensorBoardDir+"/")
	default:
		parts = append(parts, fmt.Sprintf("%d TensorBoard event files in %s/", events, tensorBoardDir))
	}
	return strings.Join(parts, ", "), len(entries), nil
}

// clearRunDir is WithOverwrite's removal, or resume auto's archive of a record with no
// checkpoint, the last step of setup, so that a setup that fails leaves the earlier run as it
// was.
func (bld *builder) clearRunDir() error {
	su := &bld.n.spec
	if su.archiveDue {
		return bld.archiveAttempt()
	}
	if !su.overwriteDue {
		return nil
	}
	dir := su.cfg.runDir.value
	removed, err := checkpoint.Clear(dir)
	if err != nil {
		return fmt.Errorf("WithOverwrite: %w (nothing of the new run was written; remove the files by hand or choose another run dir)", err)
	}
	var what []string
	files := len(removed)
	if files > 0 && removed[files-1] == checkpoint.ManifestName {
		files--
	}
	if files > 0 {
		what = append(what, fmt.Sprintf("%d checkpoint file(s)", files))
	}
	if files < len(removed) {
		what = append(what, checkpoint.ManifestName)
	}
	metrics := filepath.Join(dir, MetricsFile)
	if fi, err := os.Stat(metrics); err == nil && !fi.IsDir() {
		if err := os.Remove(metrics); err != nil {
			return fmt.Errorf("WithOverwrite: remove %s: %w", metrics, err)
		}
		what = append(what, fmt.Sprintf("%s (%s)", MetricsFile, byteSize(fi.Size())))
	}
	events, err := clearEventFiles(dir)
	if err != nil {
		return err
	}
	if events > 0 {
		what = append(what, fmt.Sprintf("%s/ (%d TensorBoard event file(s))", tensorBoardDir, events))
	}
	su.notice(fmt.Sprintf("overwrite: removed the earlier run from %s: %s; other files there stay", dir, strings.Join(what, ", ")))
	return nil
}

// tensorBoardDir is the folder of the run dir the TensorBoard logger writes (tblog.DirName; core
// does not import tblog, so that its protobuf stays out of core's graph; cmd/cli's
// TestTrainTwiceIntoOneRunDir checks the two agree).
const tensorBoardDir = "tb"

// eventFiles lists the TensorBoard event files (names holding "tfevents", as TensorBoard finds
// them) in <dir>/tb, by name; none when there is no such folder.
func eventFiles(dir string) []string {
	entries, _ := os.ReadDir(filepath.Join(dir, tensorBoardDir))
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.Contains(e.Name(), "tfevents") {
			names = append(names, e.Name())
		}
	}
	return names
}

// clearEventFiles removes the TensorBoard event files from <dir>/tb, and the folder when nothing
// else is in it: a new run's event file beside the earlier run's would show in TensorBoard as one
// run mixing two. Other files stay.
func clearEventFiles(dir string) (int, error) {
	tb := filepath.Join(dir, tensorBoardDir)
	removed := 0
	for _, name := range eventFiles(dir) {
		if err := os.Remove(filepath.Join(tb, name)); err != nil {
			return removed, fmt.Errorf("WithOverwrite: remove the earlier run's TensorBoard events %s: %w (remove %s by hand, or choose another run dir)", filepath.Join(tb, name), err, tb)
		}
		removed++
	}
	if removed > 0 {
		os.Remove(tb) // only when empty: a file of the user's keeps it
	}
	return removed, nil
}

// archiveAttempt keeps what an earlier attempt that stopped before its first checkpoint left in
// the run dir, under the first attempt number N free for both: its metrics.jsonl renamed to
// metrics.attempt-N.jsonl, and its TensorBoard event files moved from tb/ into tb.attempt-N/
// (tb/ removed when that empties it). The new run then starts its own record and events, the
// earlier lines stay readable on their own (plot and board read them like any record), and
// TensorBoard shows the earlier attempt as a run of its own instead of mixing it into the new one.
func (bld *builder) archiveAttempt() error {
	su := &bld.n.spec
	dir := su.cfg.runDir.value
	record := filepath.Join(dir, MetricsFile)
	fi, err := os.Stat(record)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("resume auto: %w", err)
	}
	hasRecord := err == nil && fi.Mode().IsRegular()
	events := eventFiles(dir)
	n, err := freeAttempt(dir)
	if err != nil {
		return err
	}
	recordTo := fmt.Sprintf("metrics.attempt-%d.jsonl", n)
	eventsTo := fmt.Sprintf("%s.attempt-%d", tensorBoardDir, n)
	const unwritten = "(nothing of the new run was written)"
	if hasRecord {
		if err := os.Rename(record, filepath.Join(dir, recordTo)); err != nil {
			return fmt.Errorf("resume auto: keeping the earlier record: %w %s", err, unwritten)
		}
	}
	if len(events) > 0 {
		if err := os.Mkdir(filepath.Join(dir, eventsTo), 0o755); err != nil {
			return fmt.Errorf("resume auto: keeping the earlier TensorBoard events: %w %s", err, unwritten)
		}
		tb := filepath.Join(dir, tensorBoardDir)
		for _, name := range events {
			if err := os.Rename(filepath.Join(tb, name), filepath.Join(dir, eventsTo, name)); err != nil {
				return fmt.Errorf("resume auto: keeping the earlier TensorBoard events in %s: %w %s", eventsTo, err, unwritten)
			}
		}
		os.Remove(tb) // only when empty: a file of the user's keeps it
	}
	kept := fmt.Sprintf("its %d TensorBoard event file(s) in %s/ are kept", len(events), eventsTo)
	if hasRecord {
		kept = fmt.Sprintf("its record (a %s %s) is kept as %s", byteSize(fi.Size()), MetricsFile, recordTo)
		if len(events) > 0 {
			kept += fmt.Sprintf(" and its %d TensorBoard event file(s) in %s/", len(events), eventsTo)
		}
	}
	su.notice(fmt.Sprintf("resume auto: the earlier run in %s stopped before its first checkpoint; %s, and this run starts afresh", dir, kept))
	return nil
}

// freeAttempt is the first attempt number N for which the run dir holds neither
// metrics.attempt-N.jsonl nor tb.attempt-N.
func freeAttempt(dir string) (int, error) {
	for n := 1; ; n++ {
		free := true
		for _, name := range []string{fmt.Sprintf("metrics.attempt-%d.jsonl", n), fmt.Sprintf("%s.attempt-%d", tensorBoardDir, n)} {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				free = false
			} else if !errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("resume auto: %w", err)
			}
		}
		if free {
			return n, nil
		}
	}
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// byteSize is n in B, kB, MB or GB (powers of 1000), as a person reads a size.
func byteSize(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1000, "kB"
	for _, u := range []string{"MB", "GB"} {
		if v < 1000 {
			break
		}
		v, unit = v/1000, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
