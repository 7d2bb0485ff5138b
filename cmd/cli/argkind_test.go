package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInfoAndLsNeverMistakeNames: info given a registered name prints the experiment even beside
// a file of that name (./NAME reads the file); info of a missing bare file name says it is no
// file either; ls of a registered name, a missing folder or a file says what it is instead of
// listing "no checkpoints".
func TestInfoAndLsNeverMistakeNames(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile("mnist-mlp", []byte("a built binary, not a checkpoint"), 0o755)
	os.WriteFile("notes.txt", []byte("x"), 0o644)
	os.Mkdir("empty", 0o755)

	code, out, errs := runCLI("info", "mnist-mlp")
	if code != 0 || !regexp.MustCompile(`Hidden\s+graphconst`).MatchString(out) {
		t.Errorf("info mnist-mlp beside a file of that name: exit %d, want the experiment's fields\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCLI("info", "./mnist-mlp"); code != 1 || !strings.Contains(errs, "checkpoint") {
		t.Errorf("info ./mnist-mlp: exit %d, want the file read as a checkpoint and refused: %s", code, errs)
	}
	if code, _, errs := runCLI("info", "last.ckpt"); code != 1 || !strings.Contains(errs, `unknown experiment "last.ckpt", nor a checkpoint file of that name`) {
		t.Errorf("info of a missing file name: exit %d, %q", code, errs)
	}

	cases := []struct {
		arg  string
		want []string
	}{
		{"mnist-mlp", []string{"no such directory", `"mnist-mlp" is a registered experiment`, "nitro ls " + filepath.Join("runs", "MLP"), "nitro info mnist-mlp"}},
		{"runs/gone", []string{"ls runs/gone: no such directory"}},
		{"notes.txt", []string{"a file, not a run directory", "nitro info notes.txt"}},
	}
	os.Remove("mnist-mlp")
	for _, c := range cases {
		code, out, errs := runCLI("ls", c.arg)
		if code != 1 || strings.Contains(out, "no checkpoints") {
			t.Errorf("ls %s: exit %d, stdout %q; want exit 1 and no listing", c.arg, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("ls %s: stderr %q lacks %q", c.arg, errs, w)
			}
		}
	}
	if code, out, errs := runCLI("ls", "empty"); code != 0 || out != "no checkpoints in empty\n" {
		t.Errorf("ls of an empty folder: exit %d, %q %q", code, out, errs)
	}
}
