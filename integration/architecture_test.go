package integration_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The architecture check holds docs/architecture.md's module plan to `go list`: for each module,
// the table's third column ("imports (workspace)") names exactly the workspace modules that the
// module's non-test packages import directly. The column's conventions, which the check reads:
//
//	`m`, `m/pkg`          a module its non-test packages import (a package names its module)
//	`m` (tests)           imported by its tests only: not compared, but its tests must import it
//	(tests: `a`, `b`)     the same for each module named inside
//	none                  no workspace module
//	any module            not compared: a module at the top (cmd)
//	*(checked: ...)*      what depcheck enforces: prose, not read
//
// A package whose last path element ends in "test" (core/coretest) is test support: only
// _test.go files import it (depcheck), so its imports count as its module's tests'.

const workspacePrefix = "github.com/nitro-go/nitro/"

// TestArchitectureImports: each module's row in docs/architecture.md lists exactly the workspace
// modules its non-test packages import, and the table has one row per module go.work uses.
func TestArchitectureImports(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mods := workModules(t, root)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseModulePlan(string(doc), mods)
	if err != nil {
		t.Fatal(err)
	}
	code, test := listWorkspaceImports(t, root, mods)
	for _, p := range archTableProblems(mods, rows, code, test) {
		t.Error(p)
	}
}

// TestArchitectureImportsRefuses: the check names the module, the import and the fix for a row
// that misses an import, lists one too many, marks a code import as a test one, and for a module
// with no row.
func TestArchitectureImportsRefuses(t *testing.T) {
	mods := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	doc := "# x\n## Module plan\n\n| module | contract | imports (workspace) |\n|---|---|---|\n" +
		"| `a` | one | none *(checked: `c` never)* |\n" +
		"| `b` | two | `a`, `d` (tests) |\n" +
		"| `c` | three | `a`, `b` (tests: `d`) |\n" +
		"\n## Next\n| `d` | not in the plan | none |\n"
	rows, err := parseModulePlan(doc, mods)
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]map[string]string{
		"a": {"b": "a/x"},           // missing from a's row
		"b": {"a": "b", "d": "b/y"}, // d is imported by code, but the row says tests
		"c": {},                     // a is listed, never imported
		"d": {},                     // no row
	}
	test := map[string]map[string]bool{"b": {}, "c": {"d": true}}
	got := strings.Join(archTableProblems(mods, rows, code, test), "\n")
	for _, want := range []string{
		"module a: its row misses `b`, which its package a/x imports: add `b` to a's row",
		"module b: its row marks `d` as imported by tests only, but its package b/y imports it: drop the mark",
		"module c: its row lists `a`, which no non-test package of c imports: remove `a` from c's row",
		"module d: the module plan has no row for d",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the problems lack %q; they were:\n%s", want, got)
		}
	}
	if strings.Contains(got, "`d` as a test import") {
		t.Errorf("c's (tests: `d`) was refused though c's tests import d:\n%s", got)
	}
	if _, err := parseModulePlan("| `a` | one | none |\n", mods); err == nil {
		t.Error("a doc with no \"## Module plan\" section: no error")
	}
	if _, err := parseModulePlan("## Module plan\n| `a` | one | `zz` |\n", mods); err == nil || !strings.Contains(err.Error(), "zz") {
		t.Errorf("a row naming no workspace module: %v, want an error naming zz", err)
	}
}

// workModules reads the module folders go.work uses ("core", "internal/prereq", ...).
func workModules(t *testing.T, root string) map[string]bool {
	t.Helper()
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+\./(\S+)\s*$`).FindAllStringSubmatch(string(work), -1) {
		used[m[1]] = true
	}
	if len(used) < 10 {
		t.Fatalf("read %d modules from go.work, want 10 or more: has its layout changed?", len(used))
	}
	return used
}

// moduleOf names the workspace module that holds the package path p (the longest module folder
// that prefixes it), or "" when p is no workspace package.
func moduleOf(p string, mods map[string]bool) string {
	rel, ok := strings.CutPrefix(p, workspacePrefix)
	if !ok {
		rel = p
	}
	best := ""
	for m := range mods {
		if (rel == m || strings.HasPrefix(rel, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// planRow is one module's row of the module plan: the modules it lists as imported by its
// non-test packages and by its tests only; any is true for "any module" (not compared).
type planRow struct {
	line       int
	code, test map[string]bool
	any        bool
}

var (
	checkedNote = regexp.MustCompile(`\*\([^*]*\)\*`)
	testsGroup  = regexp.MustCompile(`\(tests:([^()]*)\)`)
	testsMark   = regexp.MustCompile("`([^`]+)` \\(tests\\)")
	tickName    = regexp.MustCompile("`([^`]+)`")
)

// parseModulePlan reads the module plan's rows from architecture.md's "## Module plan" section.
func parseModulePlan(doc string, mods map[string]bool) (map[string]planRow, error) {
	head, plan, ok := strings.Cut(doc, "## Module plan\n")
	if !ok {
		return nil, fmt.Errorf("docs/architecture.md has no \"## Module plan\" section")
	}
	plan, _, _ = strings.Cut(plan, "\n## ")
	first := strings.Count(head, "\n") + 2
	rows := map[string]planRow{}
	for i, line := range strings.Split(plan, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) != 3 {
			return nil, fmt.Errorf("docs/architecture.md:%d: a row of %d cells, want 3 (module, contract, imports): a \" | \" inside a cell?", first+i, len(cells))
		}
		name := strings.Trim(cells[0], "| `")
		r := planRow{line: first + i, code: map[string]bool{}, test: map[string]bool{}}
		imports := strings.TrimSpace(strings.TrimSuffix(checkedNote.ReplaceAllString(cells[2], ""), "|"))
		if strings.HasPrefix(imports, "any module") {
			r.any = true
			rows[name] = r
			continue
		}
		var names []string
		mark := func(re *regexp.Regexp, set map[string]bool) {
			for _, m := range re.FindAllStringSubmatch(imports, -1) {
				for _, n := range tickName.FindAllStringSubmatch(m[0], -1) {
					names = append(names, n[1])
					set[n[1]] = true
				}
			}
			imports = re.ReplaceAllString(imports, "")
		}
		mark(testsGroup, r.test)
		mark(testsMark, r.test)
		mark(tickName, r.code)
		for _, n := range names {
			if moduleOf(n, mods) == "" {
				return nil, fmt.Errorf("docs/architecture.md:%d: %s's row names `%s`, which is no module go.work uses", r.line, name, n)
			}
		}
		r.code, r.test = modulesOf(r.code, mods), modulesOf(r.test, mods)
		rows[name] = r
	}
	return rows, nil
}

// modulesOf maps each package or module a row names to its module.
func modulesOf(names map[string]bool, mods map[string]bool) map[string]bool {
	out := map[string]bool{}
	for n := range names {
		out[moduleOf(n, mods)] = true
	}
	return out
}

// listWorkspaceImports runs go list over every module and returns, per module, the workspace
// modules its non-test packages import (with one importing package each, for the message) and
// those its tests and test-support packages import.
func listWorkspaceImports(t *testing.T, root string, mods map[string]bool) (code map[string]map[string]string, test map[string]map[string]bool) {
	t.Helper()
	args := []string{"list", "-e", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}\t{{with .Error}}{{.Err}}{{end}}"}
	for m := range mods {
		args = append(args, "./"+m+"/...")
	}
	c := exec.Command("go", args...)
	c.Dir = root
	out, err := c.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, tail(out))
	}
	code, test = map[string]map[string]string{}, map[string]map[string]bool{}
	for m := range mods {
		code[m], test[m] = map[string]string{}, map[string]bool{}
	}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list: a line of %d fields, want 4: %q", len(f), line)
		}
		if f[3] != "" {
			t.Errorf("go list %s: %s", f[0], f[3])
		}
		m := moduleOf(f[0], mods)
		support := strings.HasSuffix(path.Base(f[0]), "test")
		for _, imp := range strings.Fields(f[1]) {
			if d := moduleOf(imp, mods); d != "" && d != m && strings.HasPrefix(imp, workspacePrefix) {
				if support {
					test[m][d] = true
				} else if code[m][d] == "" {
					code[m][d] = strings.TrimPrefix(f[0], workspacePrefix)
				}
			}
		}
		for _, imp := range strings.Fields(f[2]) {
			if d := moduleOf(imp, mods); d != "" && d != m && strings.HasPrefix(imp, workspacePrefix) {
				test[m][d] = true
			}
		}
	}
	return code, test
}

// archTableProblems compares the rows with go list's imports, one message per difference, each
// naming the module, the import and the fix.
func archTableProblems(mods map[string]bool, rows map[string]planRow, code map[string]map[string]string, test map[string]map[string]bool) []string {
	const where = "docs/architecture.md"
	var problems []string
	for _, m := range slices.Sorted(maps.Keys(mods)) {
		r, ok := rows[m]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: module %s: the module plan has no row for %s (go.work uses it): add one, with its contract and the workspace modules it imports", where, m, m))
			continue
		}
		if r.any {
			continue
		}
		for _, d := range slices.Sorted(maps.Keys(code[m])) {
			switch {
			case r.test[d]:
				problems = append(problems, fmt.Sprintf("%s:%d: module %s: its row marks `%s` as imported by tests only, but its package %s imports it: drop the mark", where, r.line, m, d, code[m][d]))
			case !r.code[d]:
				problems = append(problems, fmt.Sprintf("%s:%d: module %s: its row misses `%s`, which its package %s imports: add `%s` to %s's row (or drop the import)", where, r.line, m, d, code[m][d], d, m))
			}
		}
		for _, d := range slices.Sorted(maps.Keys(r.code)) {
			if _, ok := code[m][d]; !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: module %s: its row lists `%s`, which no non-test package of %s imports: remove `%s` from %s's row (mark it (tests) if only its tests import it)", where, r.line, m, d, m, d, m))
			}
		}
		for _, d := range slices.Sorted(maps.Keys(r.test)) {
			if _, ok := code[m][d]; !ok && !test[m][d] {
				problems = append(problems, fmt.Sprintf("%s:%d: module %s: its row lists `%s` as a test import, but no test of %s imports it: remove it from %s's row", where, r.line, m, d, m, m))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rows)) {
		if !mods[name] {
			problems = append(problems, fmt.Sprintf("%s:%d: module %s: the module plan has a row for %s, which go.work does not use: remove the row (or add the module to go.work)", where, rows[name].line, name, name))
		}
	}
	return problems
}
