package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunBundleWithoutInputs: run-bundle with nothing on standard input, or an empty --inputs
// file, is refused naming --inputs, standard input and --input, before any bundle is loaded
// (the folder here is not even a bundle), instead of a decoder's bare EOF.
func TestRunBundleWithoutInputs(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.Close() // an empty standard input
	old := os.Stdin
	os.Stdin = r
	code, _, errs := runCLI("run-bundle", dir)
	os.Stdin = old
	r.Close()
	for _, want := range []string{"no inputs: standard input was empty", "--inputs FILE", `{"inputs": {"<name>": <nested arrays>}}`, "< request.json", "--input NAME=FILE"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("run-bundle with an empty stdin: exit %d, stderr %q; want %q", code, errs, want)
		}
	}
	if strings.Contains(errs, "EOF") || strings.Contains(errs, "manifest") {
		t.Errorf("stderr %q: the missing input must be said before the bundle is opened, not as EOF", errs)
	}
	empty := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI("run-bundle", dir, "--inputs", empty)
	if want := "--inputs " + empty + ": the file is empty"; code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "--input NAME=FILE") {
		t.Errorf("run-bundle --inputs EMPTY: exit %d, stderr %q; want %q", code, errs, want)
	}
}
