package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The rank comes from NITRO_RANK and NITRO_WORLD_SIZE: a bad pair is refused before any work,
// naming the variable; nitro export refuses a rank other than 0. Each command gets a run dir of
// its own, so that a broken check, which lets it run, writes nothing into the tree.
func TestDistFromEnv(t *testing.T) {
	runDir := t.TempDir()
	for _, c := range []struct {
		rank, world string
		args        []string
		want        []string
	}{
		{"2", "2", []string{"train", "mnist-mlp", "--preset", "tiny", "--max-epochs", "1", "--run-dir", runDir}, []string{`NITRO_RANK="2" with NITRO_WORLD_SIZE=2: want an integer in [0, 2)`}},
		{"0", "", []string{"evaluate", "mnist-mlp", "--preset", "tiny", "--run-dir", runDir}, []string{`NITRO_RANK="0" is set and NITRO_WORLD_SIZE is not`}},
		{"1", "2", []string{"export", "mnist-mlp", "--checkpoint", "nowhere", "--out", filepath.Join(t.TempDir(), "b")},
			[]string{"nitro export on rank 1 of 2 (nitro): only rank 0 writes exports"}},
	} {
		t.Setenv("NITRO_RANK", c.rank)
		if c.world == "" {
			os.Unsetenv("NITRO_WORLD_SIZE")
		} else {
			t.Setenv("NITRO_WORLD_SIZE", c.world)
		}
		code, _, errs := runCLI(c.args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v with NITRO_RANK=%s NITRO_WORLD_SIZE=%s: stderr %q lacks %q", c.args, c.rank, c.world, errs, w)
			}
		}
	}
}
