package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/internal/prereq"
)

// The docs test holds README.md and docs/*.md to what ships. Each fenced block is marked (the
// rule every doc follows):
//
//	```go program        a whole package main: built and vetted
//	```go program run    the same, then run (tiny data: seconds); a non-zero exit fails
//	```go fragment       shown for reading, not built
//	```sh nitro          each line starting with `nitro ` runs, in order, in one temp dir per block
//	```sh illustrative   shown, not run (long runs, GPU hosts, servers, make targets)
//
// and a sh/bash/console/shell block or a go block without its mark fails, so nothing shown in a
// doc can drift from the code unchecked. Other languages (text, json, console-output) are output
// and are not read.

// docBlock is one fenced code block of a doc.
type docBlock struct {
	file     string // the doc, relative to the repository root
	line     int    // line of the opening fence, from 1
	info     string // what follows the fence: "go program run", "sh nitro", ...
	body     []string
	bodyLine int // the line of body[0]
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// Kinds of block, from the fence's info string.
const (
	blockShown        = iota // output or another language: not read
	blockFragment            // go fragment
	blockProgram             // go program
	blockProgramRun          // go program run
	blockNitro               // sh nitro
	blockIllustrative        // sh illustrative
)

var shellLangs = map[string]bool{"sh": true, "bash": true, "console": true, "shell": true, "zsh": true}

// blockKind reads a fence's info string; an unmarked go or shell block is an error naming the
// marks it may take.
func blockKind(info string) (int, error) {
	f := strings.Fields(info)
	if len(f) == 0 {
		return blockShown, nil
	}
	lang, mark := f[0], strings.Join(f[1:], " ")
	switch {
	case lang == "go":
		switch mark {
		case "program":
			return blockProgram, nil
		case "program run":
			return blockProgramRun, nil
		case "fragment":
			return blockFragment, nil
		}
		return 0, fmt.Errorf("```%s: a go block must be marked `go program`, `go program run` or `go fragment` (a program is built and vetted, `program run` also runs it, a fragment is only shown)", info)
	case shellLangs[lang]:
		switch mark {
		case "nitro":
			return blockNitro, nil
		case "illustrative":
			return blockIllustrative, nil
		}
		return 0, fmt.Errorf("```%s: a %s block must be marked `%s nitro` (its nitro lines are run on the tiny preset) or `%s illustrative` (shown, not run)", info, lang, lang, lang)
	}
	return blockShown, nil
}

// parseDocBlocks returns the fenced blocks of a Markdown file. A fence may be indented (inside a
// list); that indentation is taken off the body's lines. An unclosed fence is an error.
func parseDocBlocks(root, rel string) ([]docBlock, error) {
	raw, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		indent, fence, info, ok := openingFence(lines[i])
		if !ok {
			continue
		}
		b := docBlock{file: rel, line: i + 1, info: info, bodyLine: i + 2}
		closed := false
		for i++; i < len(lines); i++ {
			t := strings.TrimSpace(lines[i])
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				closed = true
				break
			}
			b.body = append(b.body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s: the fence opened here is never closed", b.where())
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// openingFence reports whether line opens a fenced block: its indentation, the fence (``` or
// ~~~, three or more) and the info string.
func openingFence(line string) (indent, fence, info string, ok bool) {
	t := strings.TrimLeft(line, " \t")
	indent = line[:len(line)-len(t)]
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			return indent, t[:n], strings.TrimSpace(t[n:]), true
		}
	}
	return "", "", "", false
}

// docFiles lists README.md and docs/*.md, relative to root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		files = append(files, filepath.Join("docs", filepath.Base(m)))
	}
	return files
}

// markedBlocks parses every doc and fails the test for each unmarked block and unclosed fence.
func markedBlocks(t *testing.T, root string) map[int][]docBlock {
	t.Helper()
	byKind := map[int][]docBlock{}
	for _, rel := range docFiles(t, root) {
		blocks, err := parseDocBlocks(root, rel)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			k, err := blockKind(b.info)
			if err != nil {
				t.Errorf("%s: %v", b.where(), err)
				continue
			}
			byKind[k] = append(byKind[k], b)
		}
	}
	return byKind
}

// TestDocs builds every go program block of README.md and docs/*.md (one go vet and one go build
// for all of them and the nitro CLI), runs the `go program run` ones, and runs the nitro lines
// of every `sh nitro` block with the CLI just built.
func TestDocs(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	byKind := markedBlocks(t, root)
	programs := append(append([]docBlock{}, byKind[blockProgram]...), byKind[blockProgramRun]...)
	t.Logf("%d go programs (%d run), %d go fragments, %d sh nitro blocks, %d illustrative",
		len(programs), len(byKind[blockProgramRun]), len(byKind[blockFragment]), len(byKind[blockNitro]), len(byKind[blockIllustrative]))

	// The programs live in a folder of this module (so go.work resolves nitro's modules) whose
	// name starts with "_": ./... patterns skip it, and .gitignore lists it.
	work, err := os.MkdirTemp(filepath.Join(root, "integration"), "_docbuild")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	pkgs := map[string]string{} // where -> the binary's name
	var args []string
	for _, b := range programs {
		body := strings.Join(b.body, "\n") + "\n"
		if f, err := format.Source([]byte(body)); err == nil && string(f) != body {
			t.Errorf("%s: the program is not gofmt-formatted: run gofmt on it and paste it back", b.where())
		}
		name := programName(b)
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// The line directive makes the compiler's and vet's messages name the doc and its line.
		src := fmt.Sprintf("//line %s:%d\n%s", filepath.Join(root, b.file), b.bodyLine, body)
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs[b.where()] = name
		args = append(args, "./integration/"+filepath.Base(work)+"/"+name)
	}
	bin := t.TempDir()
	vetted := len(args) == 0 || goTool(t, root, append([]string{"vet"}, args...)...)
	if !goTool(t, root, append([]string{"build", "-o", bin + string(filepath.Separator), "./cmd/nitro"}, args...)...) || !vetted {
		return
	}

	t.Run("cli-table", func(t *testing.T) { readmeListsCommands(t, root, bin) })
	t.Run("first-experiment-in-nitro-new", func(t *testing.T) { firstExperimentPastes(t, byKind[blockProgramRun], bin) })
	t.Run("run", func(t *testing.T) {
		pjrtDir := filepath.Dir(prereq.Plugin(t))
		// The durations are logged (go test -v) for a doc's author to keep each block in seconds.
		for _, b := range byKind[blockProgramRun] {
			start := time.Now()
			out, err := runDoc(t.TempDir(), pjrtDir, bin, filepath.Join(bin, pkgs[b.where()]))
			if err != nil {
				t.Errorf("%s: the program (```go program run) failed: %v\n%s", b.where(), err, tail(out))
			}
			t.Logf("%s: go program run, %.1fs", b.where(), time.Since(start).Seconds())
		}
		for _, b := range byKind[blockNitro] {
			start := time.Now()
			runNitroBlock(t, b, pjrtDir, bin)
			t.Logf("%s: sh nitro, %.1fs", b.where(), time.Since(start).Seconds())
		}
	})
}

// readmeListsCommands: every command `nitro --help` lists has its row in the README's table.
func readmeListsCommands(t *testing.T, root, bin string) {
	out, err := exec.Command(filepath.Join(bin, "nitro"), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("nitro --help: %v\n%s", err, out)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z][a-z-]*(?: [a-z]+)?)(?: |$)`).FindAllStringSubmatch(string(out), -1) {
		cmd := m[1]
		if cmd == "help" || (strings.HasPrefix(cmd, "data") && cmd != "data convert") {
			continue
		}
		n++
		if !strings.Contains(string(readme), "| `"+cmd) {
			t.Errorf("README.md: the CLI table has no row for `nitro %s` (listed by nitro --help)", cmd)
		}
	}
	if n < 10 {
		t.Errorf("read %d commands from nitro --help, want 10 or more: has its layout changed?\n%s", n, out)
	}
}

// firstScreenLines bounds where the README's first experiment must end (72 before its main took
// Ctrl+C through signal.NotifyContext, five lines).
const firstScreenLines = 77

// firstExperimentPastes: the README's first runnable program ends on its first screen and builds pasted over the main.go of
// the project `nitro new` writes, as the README says it does (that module stands alone: no
// go.work, nitro through its replace lines).
func firstExperimentPastes(t *testing.T, run []docBlock, bin string) {
	var first *docBlock
	for i := range run {
		if run[i].file == "README.md" {
			first = &run[i]
			break
		}
	}
	if first == nil {
		t.Fatal("README.md has no ```go program run block: the first experiment is missing")
	}
	// The first screen holds what nitro is, the two commands and the whole first experiment.
	if end := first.bodyLine + len(first.body); end > firstScreenLines {
		t.Errorf("%s: the first experiment's block closes at README line %d, past the first screen (%d lines): shorten the program or the text above it",
			first.where(), end, firstScreenLines)
	}
	dir := t.TempDir()
	if out, err := runDoc(dir, "", bin, filepath.Join(bin, "nitro"), "new", "myexp"); err != nil {
		t.Fatalf("nitro new myexp: %v\n%s", err, tail(out))
	}
	proj := filepath.Join(dir, "myexp")
	if err := os.WriteFile(filepath.Join(proj, "main.go"), []byte(strings.Join(first.body, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("go", "build", "-o", filepath.Join(dir, "first"), ".")
	c.Dir = proj
	c.Env = append(os.Environ(), "GOWORK=off")
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("%s: the first experiment, pasted over main.go of a `nitro new` project, does not build: %v\n%s", first.where(), err, out)
	}
}

// programName is a package folder's name for a block: the doc's base name and the fence's line.
func programName(b docBlock) string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(b.file), ".md"))
	base = regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(base, "_")
	return fmt.Sprintf("doc_%s_%d", base, b.line)
}

// runNitroBlock runs a `sh nitro` block's nitro lines in order in one temp dir, stopping at the
// first that fails (later lines may read what it writes). A line ending in \ continues.
func runNitroBlock(t *testing.T, b docBlock, pjrtDir, bin string) {
	t.Helper()
	dir := t.TempDir()
	ran := 0
	for i := 0; i < len(b.body); i++ {
		line, at := strings.TrimSpace(b.body[i]), b.bodyLine+i
		for strings.HasSuffix(line, `\`) && i+1 < len(b.body) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(b.body[i])
		}
		if !strings.HasPrefix(line, "nitro ") {
			continue
		}
		ran++
		out, err := runDoc(dir, pjrtDir, bin, "bash", "-c", line)
		if err != nil {
			t.Errorf("%s:%d: `%s` failed: %v\n%s", b.file, at, line, err, tail(out))
			return
		}
	}
	if ran == 0 {
		t.Errorf("%s: a ```sh nitro block with no line starting with `nitro `: mark it `sh illustrative`", b.where())
	}
}

// docTimeout bounds one program or nitro line: far above what a doc's tiny run takes (seconds),
// there to stop a hang, not to time anything.
const docTimeout = 3 * time.Minute

// runDoc runs a command in dir with the plugin's folder in $NITRO_PJRT_DIR and bin first on $PATH.
func runDoc(dir, pjrtDir, bin string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "NITRO_PJRT_DIR="+pjrtDir, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %v: %w", docTimeout, err)
	}
	return out.Bytes(), err
}

// goTool runs the go command in root; it fails the test with the output and returns false when
// the command fails.
func goTool(t *testing.T, root string, args ...string) bool {
	t.Helper()
	c := exec.Command("go", args...)
	c.Dir = root
	out, err := c.CombinedOutput()
	if err != nil {
		t.Errorf("go %s of the docs' go programs and ./cmd/nitro: %v\n%s", args[0], err, out)
	}
	return err == nil
}

// tail keeps the last lines of a command's output for a failure message.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 30 {
		lines = append([]string{"..."}, lines[len(lines)-30:]...)
	}
	return strings.Join(lines, "\n")
}

// TestDocsLinks: every relative link of README.md and docs/*.md names a file that exists (code,
// in a fenced block or a `span`, is not read for links).
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("`[^`]*`")
	for _, rel := range docFiles(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		fence := ""
		for i, line := range strings.Split(string(raw), "\n") {
			if _, f, _, ok := openingFence(line); ok && (fence == "" || strings.HasPrefix(f, fence)) {
				if fence == "" {
					fence = f
				} else {
					fence = ""
				}
				continue
			}
			if fence != "" {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := strings.SplitN(m[1], "#", 2)[0]
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				p := filepath.Join(root, filepath.Dir(rel), filepath.FromSlash(target))
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s:%d: the link to %s names no file (%v)", rel, i+1, m[1], err)
				}
			}
		}
	}
}

// TestDocBlockMarks: the parser finds fences (indented too) and refuses unmarked go and shell
// blocks, so a doc cannot slip an unchecked block past TestDocs.
func TestDocBlockMarks(t *testing.T) {
	dir := t.TempDir()
	doc := "# x\n```go program run\npackage main\n```\n  ```sh nitro\n  nitro list\n  ```\n```text\nout\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := parseDocBlocks(dir, "a.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].line != 2 || blocks[0].bodyLine != 3 || blocks[1].body[0] != "nitro list" {
		t.Fatalf("parsed %+v", blocks)
	}
	for info, want := range map[string]int{"go program": blockProgram, "go program run": blockProgramRun, "go fragment": blockFragment,
		"sh nitro": blockNitro, "bash illustrative": blockIllustrative, "text": blockShown, "": blockShown, "console-output": blockShown} {
		if k, err := blockKind(info); err != nil || k != want {
			t.Errorf("blockKind(%q) = %d, %v; want %d", info, k, err, want)
		}
	}
	for _, info := range []string{"go", "go programme", "go run", "sh", "bash", "console", "sh nitr", "shell"} {
		if _, err := blockKind(info); err == nil {
			t.Errorf("blockKind(%q): accepted, want it refused as unmarked", info)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "b.md"), []byte("```go program\npackage main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseDocBlocks(dir, "b.md"); err == nil {
		t.Error("an unclosed fence: no error")
	}
}

// TestReadmeModules: the README's module table has a row for every module go.work uses, and
// none for a folder it does not.
func TestReadmeModules(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	used := workModules(t, root)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Modules\n")
	if !ok {
		t.Fatal("README.md has no \"## Modules\" section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| ([a-z][a-z/]*) \\|").FindAllStringSubmatch(table, -1) {
		rows[m[1]] = true
	}
	for m := range used {
		if !rows[m] {
			t.Errorf("README.md: the module table has no row for %s (go.work uses it)", m)
		}
	}
	for r := range rows {
		if !used[r] && r != "module" {
			t.Errorf("README.md: the module table has a row for %s, which go.work does not use", r)
		}
	}
}
