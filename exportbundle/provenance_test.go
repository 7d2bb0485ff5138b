package exportbundle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
)

// wantErr fails unless err is non-nil and its text contains want.
func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// TestSiteProvenance reads a throwaway repository's state with git: the commit and tree hashes,
// the branch, clean then dirty with the patch of the tracked change, and untracked files counted
// (they are not in the patch); a directory outside any repository, and one with no commit yet,
// are errors naming the fix.
func TestSiteProvenance(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		prereq.Git.Absent(t, err)
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=nitro", "-c", "user.email=nitro@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "trunk")
	_, _, err := exportbundle.SiteProvenance(repo)
	wantErr(t, err, "has no commit to record")

	if err := os.WriteFile(filepath.Join(repo, "model.go"), []byte("package model\n\nconst Width = 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "model.go")
	git("commit", "-q", "-m", "first")
	commit, tree := git("rev-parse", "HEAD"), git("rev-parse", "HEAD^{tree}")

	prov, patch, err := exportbundle.SiteProvenance(repo)
	if err != nil {
		t.Fatal(err)
	}
	if prov["git_commit"] != commit || prov["git_tree"] != tree || prov["git_dirty"] != "false" || prov["git_branch"] != "trunk" || patch != nil {
		t.Fatalf("clean tree: %v, patch %q; want commit %s, tree %s, branch trunk, not dirty, no patch", prov, patch, commit, tree)
	}
	if _, ok := prov["git_untracked"]; ok {
		t.Errorf("clean tree reports untracked files: %v", prov)
	}

	if err := os.WriteFile(filepath.Join(repo, "model.go"), []byte("package model\n\nconst Width = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(repo, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	prov, patch, err = exportbundle.SiteProvenance(sub) // any directory inside the work tree
	if err != nil {
		t.Fatal(err)
	}
	if prov["git_commit"] != commit || prov["git_dirty"] != "true" || prov["git_untracked"] != "1" {
		t.Fatalf("dirty tree: %v", prov)
	}
	for _, w := range []string{"diff --git a/model.go b/model.go", "-const Width = 4", "+const Width = 8"} {
		if !strings.Contains(string(patch), w) {
			t.Errorf("patch does not contain %q:\n%s", w, patch)
		}
	}
	if strings.Contains(string(patch), "notes.txt") {
		t.Errorf("patch holds the untracked file:\n%s", patch)
	}

	notGit := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(notGit))
	_, _, err = exportbundle.SiteProvenance(notGit)
	wantErr(t, err, "is not in a git work tree")
	_, _, err = exportbundle.SiteProvenance(filepath.Join(repo, "model.go"))
	wantErr(t, err, "is not a directory")
}
