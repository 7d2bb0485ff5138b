package board

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Bounds on a watched folder's scan, which runs at every refresh.
const (
	// searchDepth is how many folder levels below a watched folder hold runs:
	// runs/<experiment>/<sweep point> is three.
	searchDepth  = 3
	maxScanDirs  = 10_000 // folders visited per watched folder per refresh
	defaultRuns  = 50
	watchNoteCap = 5 // run folders named in a bound's note
)

// FindRuns is the run directories in root, in path order: root itself when it holds a
// metrics.jsonl, else the folders below it (up to searchDepth levels) that hold one, not looking
// inside a run (its checkpoints and plots are not runs). complete is false when the scan stopped
// at its bound of folders visited.
func FindRuns(root string) (runs []string, complete bool) {
	runs, _, complete = scan(root)
	return runs, complete
}

// scan is FindRuns plus the sweep dirs on its way (root or a folder below it holding a
// JournalFile), in path order: one walk finds both.
func scan(root string) (runs, sweeps []string, complete bool) {
	root = filepath.Clean(root)
	if isRun(root) {
		return []string{root}, nil, true
	}
	if isSweep(root) {
		sweeps = append(sweeps, root)
	}
	visited := 0
	complete = true
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return nil // an unreadable folder holds no run we can show
		}
		if visited++; visited > maxScanDirs {
			complete = false
			return fs.SkipAll
		}
		if isRun(path) {
			runs = append(runs, path)
			return fs.SkipDir
		}
		if isSweep(path) {
			sweeps = append(sweeps, path)
		}
		if strings.Count(strings.TrimPrefix(path, root), string(filepath.Separator)) >= searchDepth {
			return fs.SkipDir
		}
		return nil
	})
	return runs, sweeps, complete
}

// sweepsWatched moves the sweep dirs given as runs (a folder holding a JournalFile and no
// metrics.jsonl) to the watched folders: a sweep stands for its trials' runs.
func sweepsWatched(runs, watch []string) (r, w []string) {
	w = append([]string(nil), watch...)
	for _, dir := range runs {
		if isSweep(dir) && !isRun(dir) {
			w = append(w, dir)
			continue
		}
		r = append(r, dir)
	}
	return r, w
}

func isRun(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, MetricsFile))
	return err == nil
}

// watch re-scans the watched folders and follows the runs found that it does not follow yet,
// up to Config.MaxRuns; it returns what the page should say about the folders.
func (b *Board) watch() (notes []string) {
	var over, overSweeps []string
	for _, root := range b.cfg.Watch {
		found, sweeps, complete := scan(root)
		if !complete {
			notes = append(notes, fmt.Sprintf("%s: stopped looking for runs after %d folders; name its runs, or a folder nearer them", root, maxScanDirs))
		}
		// A sweep's trials come first, by number, wherever their run dirs are; those found by the
		// scan too are followed once.
		var trials []string
		for _, dir := range sweeps {
			s, past := b.followSweep(dir)
			if past {
				overSweeps = append(overSweeps, dir)
				continue
			}
			trials = append(trials, s.trialDirs()...)
		}
		found = append(trials, found...)
		if len(found) == 0 && len(sweeps) == 0 {
			if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
				notes = append(notes, fmt.Sprintf("%s does not exist yet; its runs appear once it holds them", root))
			} else {
				notes = append(notes, fmt.Sprintf("%s holds no run yet (a folder with a %s, up to %d levels down); new ones appear on the next refresh", root, MetricsFile, searchDepth))
			}
		}
		for _, dir := range found {
			if b.followed[dir] {
				continue
			}
			if len(b.tails) >= b.cfg.MaxRuns {
				over = append(over, dir)
				continue
			}
			b.followed[dir] = true
			b.tails = append(b.tails, newTail(dir, "", b.cfg.MaxPoints))
		}
	}
	if len(over) > 0 {
		named := over[:min(len(over), watchNoteCap)]
		notes = append(notes, fmt.Sprintf("%d more runs found are not shown (%s): the board follows at most MaxRuns %d runs; raise it (nitro board --max-runs) or name the runs to compare",
			len(over), strings.Join(named, ", "), b.cfg.MaxRuns))
	}
	if len(overSweeps) > 0 {
		notes = append(notes, fmt.Sprintf("%d more sweeps found are not shown (%s): the board shows at most %d; name the sweeps to compare",
			len(overSweeps), strings.Join(overSweeps[:min(len(overSweeps), watchNoteCap)], ", "), maxSweeps))
	}
	if len(b.tails) > b.named || b.relabel {
		b.named, b.relabel = len(b.tails), false
		b.nameRuns()
	}
	return notes
}
