// Command depcheck enforces the workspace's layering: no module but cmd, export and integration
// imports core; internal/prereq (the test prerequisites and the plugin search, which every module
// may import, backend included) and tensorfile (the dtype, the safetensors codec, durable
// writes) import no workspace module, so they sit below them all; the edges in forbidden (such as
// exportbundle -> checkpoint: the codec they share is tensorfile's, and engine -> core, export
// or cmd: the engine sits below core) stay out; no
// import cycle runs between modules (Go modules tolerate module-level cycles; we do not, since
// each module must be usable alone); and the training path (core's packages and everything they
// import) holds no exportbundle package and no workspace package using cgo, so a program that
// only trains links neither the bundle code nor any cgo of ours but the one PJRT interposer
// (pjrthook, which the disk compile cache hooks), nor mpi, the Open MPI binding, which only cmd and
// integration import; a test-support package (such as core/coretest) is imported by tests alone,
// and is no part of the training path; and user code (the examples, their tests, and the files
// nitro new writes) imports the contract (core, hooks), never the engine. Run from the repository root:
// go run ./integration/depcheck
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// mayImportCore lists the modules allowed to depend on core: the CLI, the tests across modules,
// and export, which ships a Nitro as a bundle through core's model view (core must not import
// it back: the training path stays free of exportbundle).
var mayImportCore = map[string]bool{"cmd": true, "export": true, "integration": true}

// cgoOnTrainingPath lists the cgo packages of ours training may link, by module folder (its root
// package only), with the reason: the PJRT interposer, through which the backend starts the
// plugin so the disk compile cache sees every compile. It is one small package with a Go-side
// contract; any other cgo stays off the training path. hostalloc's allocator (malloc defined in
// the executable) is a program's opt-in: the backend reaches it through hostalloc/seam, plain Go.
var cgoOnTrainingPath = map[string]string{
	"pjrthook": "the PJRT interposer the disk compile cache hooks (on by default, so training links it)",
}

// trainingPathOff lists the modules no package of the training path may come from.
var trainingPathOff = map[string]bool{"exportbundle": true, "mpi": true}

// mayImportMPI lists the modules allowed to depend on mpi, the cgo binding of Open MPI: the CLI
// (which opens it under mpirun) and the tests. A library module takes a collective through the
// consumer's interface (core.Collective, engine.AllReducer) instead, so it links no cgo.
var mayImportMPI = map[string]bool{"cmd": true, "integration": true}

// testSupport lists the packages written for tests: only _test.go files may import them, so no
// program links them.
var testSupport = map[string]bool{"github.com/nitro-go/nitro/core/coretest": true}

// userCode lists where code stands for what users write, by module folder: the examples an
// experiment is copied from. Such code imports the contract (core, hooks), never the engine
// that implements it, so that the engine can change below every experiment.
var userCode = map[string]string{"cmd": "./examples/..."}

// userTemplates is the folder of the files `nitro new` writes into a user's module.
const userTemplates = "cmd/cli/templates/new"

// belowUsers lists the packages user code must not import, each with the fix.
var belowUsers = map[string]string{
	"github.com/nitro-go/nitro/engine": "the engine implements the contract: a manual TrainStep takes hooks.ManualStep and returns hooks.StepResult, Metrics returns hooks.Metric (package hooks), and the run's verbs are core's",
}

// bottom lists the modules that import no workspace module: every module may import them.
var bottom = map[string]bool{"earlystop": true, "generate": true, "hooks": true, "idx": true, "internal/prereq": true, "roofline": true, "runstatus": true, "tensorfile": true}

// forbidden lists module edges that must not come back, each with the fix.
var forbidden = map[[2]string]string{
	{"exportbundle", "checkpoint"}: "a bundle shares only the safetensors codec and the dtype with checkpoints, and those are tensorfile's: import tensorfile",
	// The engine sits below core: core binds the experiment's hooks to it and reads its results.
	{"engine", "core"}:   engineBelow,
	{"engine", "export"}: engineBelow,
	{"engine", "cmd"}:    engineBelow,
}

const engineBelow = "the engine sits below core and everything above it; take what it needs through engine.Config (hooks as plain functions) and return typed results"

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	graph, err := Collect(root)
	if err == nil {
		err = Check(graph)
	}
	var deps []Dep
	if err == nil {
		deps, err = TrainingPath(root)
	}
	if err == nil {
		err = CheckTrainingPath(deps)
	}
	if err == nil {
		err = CheckTestSupport(root)
	}
	if err == nil {
		err = CheckUserCode(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "depcheck:", err)
		os.Exit(1)
	}
	fmt.Printf("depcheck: %d modules, layering ok; training path: %d workspace packages, no exportbundle, no cgo but pjrthook\n", len(graph), len(deps))
}

// Dep is one workspace package of the training path.
type Dep struct {
	Path   string // import path
	Module string // its module's folder
	Cgo    bool   // it has cgo files
}

// TrainingPath lists the workspace packages core's packages import, directly or not, core's own
// included (tests and test support excluded: a test binary is no training program).
func TrainingPath(root string) ([]Dep, error) {
	paths, err := workspacePaths(root)
	if err != nil {
		return nil, err
	}
	var roots []string
	for _, p := range listPackages(root, "core") {
		if !testSupport[p] {
			roots = append(roots, p)
		}
	}
	// cgo files count only where cgo is enabled: list them as a cgo build (the default with a C
	// compiler, and how gopjrt's XLA backend is built) sees them.
	out, err := goList(root, "core", []string{"CGO_ENABLED=1"}, append([]string{"-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}"}, roots...)...)
	if err != nil {
		return nil, err
	}
	var deps []Dep
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		for p, dir := range paths {
			if f[0] == p || strings.HasPrefix(f[0], p+"/") {
				deps = append(deps, Dep{Path: f[0], Module: dir, Cgo: f[1] != "0"})
			}
		}
	}
	return deps, nil
}

// listPackages is the import paths of the packages in module folder dir (none when go list fails:
// the listing that follows reports the failure).
func listPackages(root, dir string) []string {
	out, _ := goList(root, dir, nil, "./...")
	return strings.Fields(out)
}

// goList runs go list -e with args in module folder dir, env added to the environment.
func goList(root, dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list", "-e"}, args...)...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list in %s: %v: %s", dir, err, stderr.String())
	}
	return string(out), nil
}

// CheckTestSupport refuses a package, in any workspace module, whose non-test files import a
// test-support package.
func CheckTestSupport(root string) error {
	dirs, err := workModules(filepath.Join(root, "go.work"))
	if err != nil {
		return err
	}
	var problems []string
	for _, d := range dirs {
		out, err := goList(root, d, nil, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		if err != nil {
			return err
		}
		problems = append(problems, testSupportImports(out)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// CheckUserCode refuses an import of a package in belowUsers by the examples (their tests
// included) and by the templates `nitro new` writes.
func CheckUserCode(root string) error {
	var problems []string
	for dir, pattern := range userCode {
		out, err := goList(root, dir, nil, "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", pattern)
		if err != nil {
			return err
		}
		problems = append(problems, userCodeImports(out)...)
	}
	err := filepath.WalkDir(filepath.Join(root, userTemplates), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		text, err := os.ReadFile(p)
		for imp, fix := range belowUsers {
			if bytes.Contains(text, []byte(`"`+imp+`"`)) {
				problems = append(problems, fmt.Sprintf("the template %s imports %s: %s", p, imp, fix))
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the templates of nitro new: %w", err)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// userCodeImports reads go list lines (a package, then its imports) and names each import of a
// package in belowUsers.
func userCodeImports(listing string) []string {
	return listedImports(listing, func(pkg, imp string) string {
		if fix, ok := belowUsers[imp]; ok {
			return fmt.Sprintf("example %s imports %s: %s", pkg, imp, fix)
		}
		return ""
	})
}

// testSupportImports reads go list lines (a package, then its non-test imports) and names each
// import of a test-support package.
func testSupportImports(listing string) []string {
	return listedImports(listing, func(pkg, imp string) string {
		if testSupport[imp] {
			return fmt.Sprintf("package %s imports %s outside its tests: a test-support package is for _test.go files only; move the helper the program needs into a package of its own", pkg, imp)
		}
		return ""
	})
}

// listedImports runs problem over each (package, import) pair of go list lines (a package, then
// its imports) and collects what it says.
func listedImports(listing string, problem func(pkg, imp string) string) []string {
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[min(1, len(f)):] {
			if p := problem(f[0], imp); p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems
}

// CheckTrainingPath refuses an exportbundle package and a workspace package using cgo on the
// training path, but for the root package of a module in cgoOnTrainingPath. The rule names workspace packages only: gopjrt, which runs the XLA backend
// through the PJRT C API, uses cgo itself, so runtime/cgo is on every path that trains on XLA.
func CheckTrainingPath(deps []Dep) error {
	var problems []string
	for _, d := range deps {
		if trainingPathOff[d.Module] {
			problems = append(problems, fmt.Sprintf("core's import graph holds %s (module %s): training must link neither the bundle code nor the MPI binding; move what core needs below core, or the use above it (export, cmd)", d.Path, d.Module))
		}
		if d.Cgo && !(cgoOnTrainingPath[d.Module] != "" && path.Base(d.Path) == d.Module) {
			problems = append(problems, fmt.Sprintf("core's import graph holds %s, which uses cgo: training must link no cgo of ours; put the cgo code in a module only export, cmd or integration imports", d.Path))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// Collect returns, for each module named in root/go.work (by folder name), the workspace modules
// its packages import (tests included).
func Collect(root string) (map[string][]string, error) {
	paths, err := workspacePaths(root)
	if err != nil {
		return nil, err
	}
	graph := map[string][]string{}
	for _, d := range paths {
		out, err := goList(root, d, nil, "-f", "{{join .Imports \"\\n\"}}\n{{join .TestImports \"\\n\"}}\n{{join .XTestImports \"\\n\"}}", "./...")
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, imp := range strings.Fields(out) {
			for p, dep := range paths {
				if (imp == p || strings.HasPrefix(imp, p+"/")) && dep != d && !seen[dep] {
					seen[dep] = true
					graph[d] = append(graph[d], dep)
				}
			}
		}
		sort.Strings(graph[d])
		if _, ok := graph[d]; !ok {
			graph[d] = nil
		}
	}
	return graph, nil
}

// Check applies the rules to a module graph (folder -> imported folders).
func Check(graph map[string][]string) error {
	var problems []string
	names := make([]string, 0, len(graph))
	for m := range graph {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		for _, dep := range graph[m] {
			if bottom[m] {
				problems = append(problems, fmt.Sprintf("module %s imports %s: it must import no workspace module, since every module may import it", m, dep))
			}
			if fix, ok := forbidden[[2]string{m, dep}]; ok {
				problems = append(problems, fmt.Sprintf("module %s imports %s: %s", m, dep, fix))
			}
			if dep == "core" && !mayImportCore[m] {
				problems = append(problems, fmt.Sprintf("module %s imports core: only cmd, export and integration may; move the shared code into %s or a lower module", m, m))
			}
			if dep == "mpi" && !mayImportMPI[m] {
				problems = append(problems, fmt.Sprintf("module %s imports mpi (cgo, Open MPI): only cmd and integration may; take a core.Collective or an engine.AllReducer instead", m))
			}
		}
	}
	if cycle := findCycle(graph, names); cycle != nil {
		problems = append(problems, "import cycle between modules: "+strings.Join(cycle, " -> "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func findCycle(graph map[string][]string, names []string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(string) []string
	visit = func(m string) []string {
		color[m] = grey
		stack = append(stack, m)
		for _, dep := range graph[m] {
			switch color[dep] {
			case grey:
				for i, s := range stack {
					if s == dep {
						return append(append([]string{}, stack[i:]...), dep)
					}
				}
			case white:
				if c := visit(dep); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[m] = black
		return nil
	}
	for _, m := range names {
		if color[m] == white {
			if c := visit(m); c != nil {
				return c
			}
		}
	}
	return nil
}

// workspacePaths maps each module path named in root/go.work to its folder.
func workspacePaths(root string) (map[string]string, error) {
	dirs, err := workModules(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for _, d := range dirs {
		p, err := modulePath(filepath.Join(root, d, "go.mod"))
		if err != nil {
			return nil, err
		}
		paths[p] = d
	}
	return paths, nil
}

func workModules(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "use ("):
			in = true
		case in && line == ")":
			in = false
		case in && line != "":
			dirs = append(dirs, filepath.Clean(line))
		case strings.HasPrefix(line, "use "):
			dirs = append(dirs, filepath.Clean(strings.TrimSpace(strings.TrimPrefix(line, "use "))))
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s names no modules", path)
	}
	return dirs, sc.Err()
}

func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s has no module line", gomod)
}
