package exportbundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// FindBundles returns the bundle folders a model repository at root holds: root itself when it
// holds a manifest.json (one bundle), else every folder below root that holds one, sorted, never
// looking inside a bundle (a bundle's files are not bundles). A root with none is an error that
// says what was looked for. The bundles are not read here: Open verifies each.
func FindBundles(root string) ([]string, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: model repository: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("exportbundle: model repository %s: not a folder (give a bundle folder, or a folder of them)", root)
	}
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if _, err := os.Stat(filepath.Join(path, ManifestFile)); err == nil {
			dirs = append(dirs, path)
			return fs.SkipDir
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("exportbundle: model repository %s: %w", root, err)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("exportbundle: model repository %s: no bundle in it (no folder holding %s; nitro export writes one)", root, ManifestFile)
	}
	slices.Sort(dirs)
	return dirs, nil
}
