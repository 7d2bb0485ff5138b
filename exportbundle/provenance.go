package exportbundle

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// SiteProvenance reads the state of the git repository holding root, by running git there (the
// caller names the root: nitro never assumes the working directory is the model's repository).
// It returns git_commit (HEAD), git_tree (HEAD's tree hash), git_dirty ("true" when tracked files
// differ from HEAD), git_branch (unless HEAD is detached) and git_untracked (the count of untracked
// files, which the patch does not hold, when there are any), and the patch of the tracked changes
// against HEAD (binary-safe; nil on a clean tree), which a bundle carries as working_tree.patch (site provenance belongs to the artifact
// format: only this format knows it can hold a multi-line patch). An
// error names what failed: no git on PATH, root not in a repository, no commit yet.
func SiteProvenance(root string) (map[string]string, []byte, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", root, err)
	} else if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", root)
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, nil, fmt.Errorf("site provenance runs git, and git is not on PATH (%v): install git, or leave ProvenanceRoot empty to export without repository state", err)
	}
	git := func(args ...string) ([]byte, error) {
		cmd := exec.Command(gitPath, append([]string{"-C", root, "--no-pager", "-c", "core.quotepath=off"}, args...)...)
		cmd.Env = gitEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			msg := strings.TrimSpace(stderr.String())
			if msg == "" {
				msg = err.Error()
			}
			return nil, fmt.Errorf("git %s in %s: %s", strings.Join(args, " "), root, msg)
		}
		return out, nil
	}
	if out, err := git("rev-parse", "--is-inside-work-tree"); err != nil || strings.TrimSpace(string(out)) != "true" {
		if err == nil {
			err = errors.New("not inside a work tree")
		}
		return nil, nil, fmt.Errorf("%s is not in a git work tree: %w", root, err)
	}
	commit, err := git("rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, nil, fmt.Errorf("the repository at %s has no commit to record (commit first): %w", root, err)
	}
	tree, err := git("rev-parse", "--verify", "HEAD^{tree}")
	if err != nil {
		return nil, nil, err
	}
	patch, err := git("diff", "--binary", "--no-color", "--no-ext-diff", "HEAD", "--")
	if err != nil {
		return nil, nil, err
	}
	untracked, err := git("ls-files", "--others", "--exclude-standard", "-z", "--", ":/")
	if err != nil {
		return nil, nil, err
	}
	prov := map[string]string{
		"git_commit": strings.TrimSpace(string(commit)),
		"git_tree":   strings.TrimSpace(string(tree)),
		"git_dirty":  strconv.FormatBool(len(patch) > 0),
	}
	for _, h := range []string{prov["git_commit"], prov["git_tree"]} {
		if _, err := hex.DecodeString(h); err != nil || len(h) < 40 {
			return nil, nil, fmt.Errorf("git in %s answered %q, which is not an object hash", root, h)
		}
	}
	if branch, err := git("symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		prov["git_branch"] = strings.TrimSpace(string(branch))
	}
	if k := bytes.Count(untracked, []byte{0}); k > 0 {
		prov["git_untracked"] = strconv.Itoa(k)
	}
	if len(patch) == 0 {
		patch = nil
	}
	return prov, patch, nil
}

// gitEnv is the process environment without the variables that would point git at another
// repository, index or work tree than the root it is run in.
func gitEnv() []string {
	redirect := []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX"}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(redirect, k) {
			env = append(env, kv)
		}
	}
	return env
}
