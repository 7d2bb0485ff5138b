package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Clear removes what a checkpointer wrote in dir and nothing else: each checkpoint file the
// manifest lists, the files whose removal a save left pending, then the manifest itself. Any
// other file in dir stays. It returns the base names it removed, the manifest last; a missing
// manifest is an empty answer. A malformed manifest is an error and removes nothing, since
// what it lists cannot be told apart from foreign files.
func Clear(dir string) ([]string, error) { return clearDir(OSFS{}, dir) }

func clearDir(fsys FS, dir string) ([]string, error) {
	m, err := readManifest(fsys, dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	rm := func(base string) {
		switch err := fsys.Remove(filepath.Join(dir, base)); {
		case err == nil:
			removed = append(removed, base)
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	for _, e := range m.Checkpoints {
		rm(e.File)
	}
	for _, f := range m.Displaced {
		rm(f)
	}
	if len(errs) > 0 { // the manifest stays, listing what could not be removed
		return removed, fmt.Errorf("checkpoint: clear %s: %w", dir, errors.Join(errs...))
	}
	rm(ManifestName)
	if len(errs) > 0 {
		return removed, fmt.Errorf("checkpoint: clear %s: %w", dir, errors.Join(errs...))
	}
	return removed, nil
}
