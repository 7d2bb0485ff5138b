// Package pluginsearch is nitro's one search for the XLA CPU PJRT plugin: backend resolves
// its backend with it, and the tests of modules that cannot import core (exportbundle) find the
// same plugin with it, so the two cannot drift apart. It uses the standard library only.
//
// The places, in order: each entry of $PJRT_PLUGIN_LIBRARY_PATH (a list of folders, or of plugin
// files), $NITRO_PJRT_DIR (a folder, or the plugin file), a .nitro/pjrt folder in the working
// directory or any parent of it (where `make setup` installs), the same beside the running
// executable, and os.UserCacheDir()/nitro/pjrt (where `nitro setup` installs).
//
// A place the user named (the two variables) is never passed over in silence: an entry that does
// not exist, or a file that is not a shared library, is an error naming the variable, because
// looking further would load some other plugin while the user believes theirs runs. A found file
// that is not a loadable library (a broken link, a folder, a text file) is an error too, wherever
// it was found, for the same reason.
package pluginsearch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is the name the plugin has in a folder: gopjrt's name for the CPU plugin.
const File = "pjrt_c_api_cpu_plugin.so"

// Variables that name places to search.
const (
	EnvLibraryPath = "PJRT_PLUGIN_LIBRARY_PATH" // ':' list of folders or plugin files (gopjrt's variable)
	EnvDir         = "NITRO_PJRT_DIR"           // one folder holding the plugin, or the plugin file
)

// ErrNotFound is the error callers wrap when no place holds the plugin (Find itself reports that
// as a zero Found, not an error).
var ErrNotFound = errors.New("no PJRT plugin " + File + " was found")

// Place is one place to look.
type Place struct {
	Path   string // a folder, or (for a named place) possibly the plugin file itself
	Source string // what put it in the search: "$PJRT_PLUGIN_LIBRARY_PATH", "the working directory", ...
	// Named: the user chose it, so it must exist and a file there must be a shared library.
	Named bool
	// MustHold: a folder that does not hold File is an error ($NITRO_PJRT_DIR names the plugin's
	// own folder; $PJRT_PLUGIN_LIBRARY_PATH folders may hold other PJRT plugins only).
	MustHold bool
}

// Found is the plugin the search picked.
type Found struct {
	Path   string // absolute path of the plugin file
	Source string // the Place.Source it came from
	Named  bool   // it came from a place the user named
}

// RefusedError is a place the search stopped at instead of looking further.
type RefusedError struct {
	Place Place
	Why   string // what is wrong with it
	Fix   string // what to do
}

func (e *RefusedError) Error() string {
	what := e.Place.Path
	if e.Place.Named {
		what = fmt.Sprintf("%s entry %s", e.Place.Source, e.Place.Path)
	} else {
		what = fmt.Sprintf("%s (in the search: %s)", e.Place.Path, e.Place.Source)
	}
	return fmt.Sprintf("XLA CPU PJRT plugin: %s %s: %s", what, e.Why, e.Fix)
}

// Places is the search, from the environment, the working directory, the executable at exe (""
// leaves it out) and the user cache folder.
func Places(exe string) []Place {
	var out []Place
	for _, d := range filepath.SplitList(os.Getenv(EnvLibraryPath)) {
		if d != "" {
			out = append(out, Place{Path: d, Source: "$" + EnvLibraryPath, Named: true})
		}
	}
	if d := os.Getenv(EnvDir); d != "" {
		out = append(out, Place{Path: d, Source: "$" + EnvDir, Named: true, MustHold: true})
	}
	if wd, err := os.Getwd(); err == nil {
		for _, d := range upward(wd) {
			out = append(out, Place{Path: d, Source: "the working directory"})
		}
	}
	if exe != "" {
		for _, d := range upward(filepath.Dir(exe)) {
			out = append(out, Place{Path: d, Source: "the executable's folder"})
		}
	}
	if d, err := UserDir(); err == nil {
		out = append(out, Place{Path: d, Source: "the user cache folder"})
	}
	return dedupe(out)
}

// UserDir is the per-user folder `nitro setup` installs into: os.UserCacheDir()/nitro/pjrt.
func UserDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "nitro", "pjrt"), nil
}

// Find returns the first plugin in places and the paths looked at, in order. No plugin anywhere
// is a zero Found and a nil error; a place refused (see the package comment) is a *RefusedError.
func Find(places []Place) (Found, []string, error) {
	var searched []string
	for _, pl := range places {
		searched = append(searched, pl.Path)
		st, err := os.Stat(pl.Path)
		if err != nil {
			if pl.Named {
				why := fmt.Sprintf("cannot be used (%v)", err)
				if os.IsNotExist(err) {
					why = "does not exist"
				}
				return Found{}, searched, &RefusedError{pl, why, "name an existing plugin file or the folder holding " + File + ", or remove the entry"}
			}
			continue
		}
		cand := pl.Path
		if st.IsDir() {
			cand = filepath.Join(pl.Path, File)
			if _, err := os.Lstat(cand); os.IsNotExist(err) {
				if pl.MustHold {
					return Found{}, searched, &RefusedError{pl, "holds no " + File, "install it there (`nitro setup --dir " + pl.Path + "`), or unset the variable"}
				}
				continue
			}
		} else if !pl.Named {
			continue // the search's own places are folders; a file in their stead is not the plugin
		}
		if why := notLibrary(cand); why != "" {
			fix := "reinstall it (`nitro setup --force`, or `make setup` in the repository), or remove it"
			if pl.Named {
				fix = "name the plugin itself or its folder, or remove the entry"
			}
			if cand != pl.Path {
				why = "holds " + File + ", which " + why
			}
			return Found{}, searched, &RefusedError{pl, why, fix}
		}
		abs, err := filepath.Abs(cand)
		if err != nil {
			return Found{}, searched, &RefusedError{pl, err.Error(), "use an absolute path"}
		}
		return Found{Path: abs, Source: pl.Source, Named: pl.Named}, searched, nil
	}
	return Found{}, searched, nil
}

// libraryMagics open the shared-library formats the plugin can come in: ELF (Linux), Mach-O thin
// and fat (macOS), PE (Windows).
var libraryMagics = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, {0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	{'M', 'Z'},
}

// notLibrary says why path cannot be a loadable plugin ("" when it can be): it must be a regular
// file (after links) that starts as a shared library does.
func notLibrary(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		if _, lerr := os.Lstat(path); lerr == nil {
			return "is a broken symbolic link"
		}
		return err.Error()
	}
	if !st.Mode().IsRegular() {
		return "is not a regular file (" + st.Mode().Type().String() + ")"
	}
	f, err := os.Open(path)
	if err != nil {
		return "cannot be read (" + err.Error() + ")"
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	for _, m := range libraryMagics {
		if bytes.HasPrefix(head, m) {
			return ""
		}
	}
	return fmt.Sprintf("is not a shared library (it starts with %q, not an ELF, Mach-O or PE header)", head)
}

// upward lists <dir>/.nitro/pjrt for dir and each of its parents.
func upward(dir string) []string {
	var out []string
	for {
		out = append(out, filepath.Join(dir, ".nitro", "pjrt"))
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		dir = parent
	}
}

// dedupe keeps each path's first place (a named place stays named).
func dedupe(in []Place) []Place {
	seen := map[string]bool{}
	var out []Place
	for _, p := range in {
		if !seen[p.Path] {
			seen[p.Path] = true
			out = append(out, p)
		}
	}
	return out
}
