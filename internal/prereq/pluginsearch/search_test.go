package pluginsearch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq/pluginsearch"
)

const elf = "\x7fELF and the rest of a library"

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// envPlaces is the search with only the two variables set (no working directory, executable or
// user cache place can interfere: those are dropped).
func envPlaces(t *testing.T, libPath, dir string) []pluginsearch.Place {
	t.Helper()
	t.Setenv(pluginsearch.EnvLibraryPath, libPath)
	t.Setenv(pluginsearch.EnvDir, dir)
	var named []pluginsearch.Place
	for _, p := range pluginsearch.Places("") {
		if p.Named {
			named = append(named, p)
		}
	}
	return named
}

func refused(t *testing.T, err error, wants ...string) {
	t.Helper()
	var r *pluginsearch.RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("want a *RefusedError, got %v", err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

// TestFileEntryIsThePlugin: a $PJRT_PLUGIN_LIBRARY_PATH entry naming the plugin file itself (under
// any name) is the plugin, ahead of a later place that holds one.
func TestFileEntryIsThePlugin(t *testing.T) {
	dir := t.TempDir()
	mine := write(t, filepath.Join(dir, "mine", "xla_cpu_pjrt.so"), elf)
	later := filepath.Join(dir, "later")
	write(t, filepath.Join(later, pluginsearch.File), elf)
	found, searched, err := pluginsearch.Find(envPlaces(t, mine, later))
	if err != nil || found.Path != mine || found.Source != "$PJRT_PLUGIN_LIBRARY_PATH" || !found.Named {
		t.Fatalf("got %+v, %v (searched %v); want %s from $PJRT_PLUGIN_LIBRARY_PATH", found, err, searched, mine)
	}
	// The same for $NITRO_PJRT_DIR.
	found, _, err = pluginsearch.Find(envPlaces(t, "", mine))
	if err != nil || found.Path != mine || found.Source != "$NITRO_PJRT_DIR" {
		t.Fatalf("$NITRO_PJRT_DIR naming the file: got %+v, %v", found, err)
	}
}

// TestBadFileEntryRefused: a named file that is not a shared library stops the search, naming the
// variable, instead of letting a later plugin load.
func TestBadFileEntryRefused(t *testing.T) {
	dir := t.TempDir()
	bad := write(t, filepath.Join(dir, "plugin.so"), "#!/bin/sh\necho not a library\n")
	later := filepath.Join(dir, "later")
	write(t, filepath.Join(later, pluginsearch.File), elf)
	found, _, err := pluginsearch.Find(envPlaces(t, bad, later))
	if found.Path != "" {
		t.Fatalf("fell through to %s", found.Path)
	}
	refused(t, err, "$PJRT_PLUGIN_LIBRARY_PATH", bad, "not a shared library", "remove the entry")
	empty := write(t, filepath.Join(dir, "empty.so"), "")
	_, _, err = pluginsearch.Find(envPlaces(t, empty, later))
	refused(t, err, "$PJRT_PLUGIN_LIBRARY_PATH", empty, "not a shared library")
}

// TestMissingNamedPathRefused: a named entry that does not exist, file or folder, is an error; so
// is $NITRO_PJRT_DIR naming a folder without the plugin.
func TestMissingNamedPathRefused(t *testing.T) {
	dir := t.TempDir()
	later := filepath.Join(dir, "later")
	write(t, filepath.Join(later, pluginsearch.File), elf)
	for _, missing := range []string{filepath.Join(dir, "gone", "plugin.so"), filepath.Join(dir, "typo-folder")} {
		found, _, err := pluginsearch.Find(envPlaces(t, missing, later))
		if found.Path != "" {
			t.Fatalf("%s: fell through to %s", missing, found.Path)
		}
		refused(t, err, "$PJRT_PLUGIN_LIBRARY_PATH entry "+missing, "does not exist")
		found, _, err = pluginsearch.Find(envPlaces(t, "", missing))
		if found.Path != "" {
			t.Fatalf("$NITRO_PJRT_DIR=%s: fell through to %s", missing, found.Path)
		}
		refused(t, err, "$NITRO_PJRT_DIR entry "+missing, "does not exist")
	}
	emptyDir := filepath.Join(dir, "empty")
	os.Mkdir(emptyDir, 0o755)
	_, _, err := pluginsearch.Find(envPlaces(t, "", emptyDir))
	refused(t, err, "$NITRO_PJRT_DIR entry "+emptyDir, "holds no "+pluginsearch.File, "nitro setup --dir "+emptyDir)
}

// TestLibraryPathFoldersAreAList: $PJRT_PLUGIN_LIBRARY_PATH folders without the CPU plugin (they
// may hold other PJRT plugins) are passed over; the first that holds it wins.
func TestLibraryPathFoldersAreAList(t *testing.T) {
	dir := t.TempDir()
	gpu := filepath.Join(dir, "gpu")
	write(t, filepath.Join(gpu, "pjrt_c_api_cuda_plugin.so"), elf)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, filepath.Join(a, pluginsearch.File), elf)
	write(t, filepath.Join(b, pluginsearch.File), elf)
	found, searched, err := pluginsearch.Find(envPlaces(t, gpu+string(os.PathListSeparator)+a, b))
	if err != nil || found.Path != filepath.Join(a, pluginsearch.File) || len(searched) != 2 {
		t.Fatalf("got %+v, %v, searched %v", found, err, searched)
	}
}

// TestBrokenPluginInTheSearchRefused: a plugin file in the search's own places that is a broken
// link or not a library is an error, not a reason to load the next one.
func TestBrokenPluginInTheSearchRefused(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	write(t, filepath.Join(second, pluginsearch.File), elf)
	os.MkdirAll(first, 0o755)
	if err := os.Symlink(filepath.Join(dir, "deleted.so"), filepath.Join(first, pluginsearch.File)); err != nil {
		t.Fatal(err)
	}
	places := []pluginsearch.Place{{Path: first, Source: "the working directory"}, {Path: second, Source: "the user cache folder"}}
	found, _, err := pluginsearch.Find(places)
	if found.Path != "" {
		t.Fatalf("fell through to %s", found.Path)
	}
	refused(t, err, first, "broken symbolic link", "nitro setup --force")
	os.Remove(filepath.Join(first, pluginsearch.File))
	write(t, filepath.Join(first, pluginsearch.File), "x")
	_, _, err = pluginsearch.Find(places)
	refused(t, err, first, "not a shared library")
	// A folder without the plugin, or missing altogether, is simply passed over.
	os.Remove(filepath.Join(first, pluginsearch.File))
	places = append([]pluginsearch.Place{{Path: filepath.Join(dir, "absent"), Source: "the working directory"}}, places...)
	if found, searched, err := pluginsearch.Find(places); err != nil || found.Path != filepath.Join(second, pluginsearch.File) || len(searched) != 3 {
		t.Fatalf("got %+v, %v, searched %v", found, err, searched)
	}
}

// TestPlacesOrder: the variables first, then .nitro/pjrt upward from the working directory, then
// beside the executable, the user cache folder last; each path once.
func TestPlacesOrder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	t.Setenv(pluginsearch.EnvLibraryPath, "/x"+string(os.PathListSeparator)+string(os.PathListSeparator)+"/y")
	t.Setenv(pluginsearch.EnvDir, "/z")
	ps := pluginsearch.Places(filepath.Join(dir, "bin", "nitro"))
	var got []string
	for _, p := range ps {
		got = append(got, p.Path)
	}
	wd, _ := os.Getwd()
	if len(ps) < 6 || got[0] != "/x" || got[1] != "/y" || got[2] != "/z" || !ps[2].MustHold || ps[1].MustHold ||
		got[3] != filepath.Join(wd, ".nitro", "pjrt") || ps[3].Named || got[len(got)-1] != filepath.Join(dir, "cache", "nitro", "pjrt") {
		t.Fatalf("places %v", got)
	}
	exeAt, wdAt := -1, -1
	for i, p := range ps {
		if p.Path == filepath.Join(dir, "bin", ".nitro", "pjrt") {
			exeAt = i
		}
		if p.Path == filepath.Join(wd, ".nitro", "pjrt") {
			wdAt = i
		}
		for _, q := range ps[:i] {
			if q.Path == p.Path {
				t.Errorf("%s listed twice", p.Path)
			}
		}
	}
	if exeAt < 0 || exeAt <= wdAt {
		t.Fatalf("the executable's folder must come after the working directory's: %v", got)
	}
}
