package cli

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// newTemplates is the project `nitro new` writes: each file's path without .tmpl (gitignore
// becomes .gitignore). No template is named *.go or go.mod, which would make the folder a
// package or a module of its own.
//
//go:embed templates/new
var newTemplates embed.FS

// EnvNitroSrc names a nitro checkout for `nitro new` to point the project's replace lines at.
const EnvNitroSrc = "NITRO_SRC"

// nitroModulePrefix starts every nitro module path.
const nitroModulePrefix = "github.com/nitro-go/nitro/"

// sourceRoot is the nitro checkout this binary was built from, "" when unknown (a -trimpath
// build records module paths, not folders); a variable so that a test can take it away.
var sourceRoot = func() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file))) // <root>/cmd/cli/new.go
}

func newNewCmd(stdout, stderr io.Writer) *cobra.Command {
	var module, nitro string
	c := &cobra.Command{
		Use:   "new <dir> [--module PATH] [--nitro DIR]",
		Short: "write a Go module with one experiment of your own, its main, a test and a Makefile",
		Long: `Writes a new Go module into DIR (which must not exist, or be empty): an MLP on generated
data (experiment/, the four hooks, a tiny preset, a test), a main that registers it with
cli.Register and runs nitro's command line, a Makefile (make run, make test, make setup), a
README, and go.mod with a replace line for every nitro module it reaches, since their paths
are not published: each points at a local nitro checkout, the first of --nitro DIR,
$` + EnvNitroSrc + `, or the checkout this binary was built from. go.sum starts from every hash
the checkout's go.sum files hold and is completed by "go mod tidy", offline first: after the
checkout's "make setup" it needs no network. The project is written into a staging folder
and renamed to DIR only when complete, so a failure leaves nothing behind.
--module is the module path (default: DIR's base name).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("new needs one directory to write the project into, e.g. nitro new myexp")
			}
			return nil
		},
		ValidArgsFunction: dirsOnly,
		RunE: func(_ *cobra.Command, args []string) error {
			return newProject(args[0], module, nitro, stdout, stderr)
		},
	}
	c.Flags().StringVar(&module, "module", "", "the new module's path (default: the directory's base name)")
	c.Flags().StringVar(&nitro, "nitro", "", "the nitro checkout the replace lines point at (default: $"+EnvNitroSrc+", then the one this binary was built from)")
	return c
}

// project is what the templates are filled with.
type project struct {
	Module, Name, GoVersion, NitroRoot string
	Requires                           []modLine // Version set
	Replaces                           []modLine // Dir set
}

type modLine struct{ Path, Version, Dir string }

// newProject writes the project into a staging folder beside dir, fills its go.sum there, and
// only then renames it to dir: a failure at any step leaves dir as it was (absent, or empty).
func newProject(dir, module, nitroFlag string, stdout, stderr io.Writer) error {
	if err := emptyTarget(dir); err != nil {
		return err
	}
	root, err := nitroCheckout(nitroFlag)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("new %s: %w", dir, err)
	}
	p, err := projectFor(abs, module, root)
	if err != nil {
		return err
	}
	made, err := makeParent(abs)
	if err != nil {
		return fmt.Errorf("new %s: %w", dir, err)
	}
	stage, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".nitro-new-")
	if err != nil {
		removeMade(made)
		return fmt.Errorf("new %s: %w", dir, err)
	}
	linked, err := fillProject(stage, abs, root, p, stderr)
	if err == nil {
		err = moveInto(stage, abs)
	}
	if err != nil {
		os.RemoveAll(stage)
		removeMade(made)
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: module %s, experiment %q, its replace lines pointing at %s\n", dir, p.Module, p.Name, root)
	if linked != "" {
		fmt.Fprintf(stdout, "plugin: %s links to %s, the checkout's XLA CPU plugin\n", filepath.Join(dir, ".nitro", "pjrt"), linked)
	}
	fmt.Fprintf(stdout, "next: cd %s && make test && make run  (make setup once per machine installs the XLA plugin)\n", dir)
	return nil
}

// fillProject writes the templates and a complete go.sum into stage, and links the checkout's
// plugin there; it returns the plugin folder linked ("" for none).
func fillProject(stage, dir, root string, p project, stderr io.Writer) (string, error) {
	if err := writeTemplates(stage, p); err != nil {
		return "", err
	}
	// Every hash the checkout's go.sum files hold (a superset of the project's): tidy then
	// verifies the modules the project shares with the checkout from these lines, never from
	// the checksum database, which a machine that reaches only the module proxy cannot ask.
	sums, err := checkoutSums(root)
	if err != nil {
		return "", fmt.Errorf("new: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stage, "go.sum"), sums, 0o644); err != nil {
		return "", fmt.Errorf("new: %w", err)
	}
	if err := tidy(stage, stderr); err != nil {
		return "", fmt.Errorf("new %s: the module cache lacks modules the project needs and the module proxy could not supply them (%v): run `make setup` in %s, which downloads them, then nitro new again; nothing was written", dir, err, root)
	}
	linked, err := linkCheckoutPlugin(stage, root)
	if err != nil {
		fmt.Fprintf(stderr, "nitro: new: %v; the project searches for a plugin the usual way (make setup installs one)\n", err)
	}
	return linked, nil
}

// checkoutSums is the union of the lines of the checkout's go.sum files (every module's and
// go.work.sum), sorted.
func checkoutSums(root string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(root, "*", "go.sum"))
	if err != nil {
		return nil, err
	}
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", "go.sum"))
	files = append(append(files, more...), filepath.Join(root, "go.work.sum"))
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				seen[line] = true
			}
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("the checkout %s holds no go.sum: is it complete?", root)
	}
	lines := make([]string, 0, len(seen))
	for l := range seen {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n"), nil
}

// makeParent creates dir's parent folders that are missing and returns the topmost it made ("" for
// none), so that a failed new can take back what it created.
func makeParent(dir string) (string, error) {
	top := ""
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		top = p
		if filepath.Dir(p) == p {
			break
		}
	}
	if top == "" {
		return "", nil
	}
	return top, os.MkdirAll(filepath.Dir(dir), 0o755)
}

func removeMade(top string) {
	if top != "" {
		os.RemoveAll(top)
	}
}

// moveInto renames the filled stage to dir; an empty dir that is already there is replaced
// (emptyTarget refused any other).
func moveInto(stage, dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("new %s: %w", dir, err)
	}
	if err := os.Rename(stage, dir); err != nil {
		return fmt.Errorf("new %s: %w", dir, err)
	}
	return nil
}

// linkCheckoutPlugin links the project's .nitro/pjrt to the checkout's when the checkout has a
// plugin installed (its make setup), so that the project, which lies outside the checkout,
// finds it by the usual search instead of falling back to pure Go; it returns the target, or ""
// when the checkout has none.
func linkCheckoutPlugin(project, root string) (string, error) {
	src := filepath.Join(root, ".nitro", "pjrt")
	plugins, _ := filepath.Glob(filepath.Join(src, "*.so"))
	if len(plugins) == 0 {
		return "", nil
	}
	if err := os.MkdirAll(filepath.Join(project, ".nitro"), 0o755); err != nil {
		return "", fmt.Errorf("linking the checkout's plugin: %w", err)
	}
	if err := os.Symlink(src, filepath.Join(project, ".nitro", "pjrt")); err != nil {
		return "", fmt.Errorf("linking the checkout's plugin: %w", err)
	}
	return src, nil
}

// emptyTarget refuses a dir that is a file, or a folder with anything in it.
func emptyTarget(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("new %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("new %s: a file is there; name a new directory (or an empty one)", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("new %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("new %s: the directory is not empty (it holds %s, ...): nitro new writes only into a new or empty directory, so it never overwrites your files", dir, entries[0].Name())
	}
	return nil
}

// nitroCheckout is the nitro checkout to point at: --nitro, then $NITRO_SRC (each refused when
// it is no checkout, rather than passed over), then the binary's source root.
func nitroCheckout(flag string) (string, error) {
	for _, c := range []struct{ dir, from string }{{flag, "--nitro"}, {os.Getenv(EnvNitroSrc), "$" + EnvNitroSrc}} {
		if c.dir == "" {
			continue
		}
		root, err := filepath.Abs(c.dir)
		if err == nil {
			err = isCheckout(root)
		}
		if err != nil {
			return "", fmt.Errorf("new: %s %s is not a nitro checkout: %w", c.from, c.dir, err)
		}
		return root, nil
	}
	if root := sourceRoot(); root != "" && isCheckout(root) == nil {
		return root, nil
	}
	return "", fmt.Errorf("new: no nitro checkout found for the project's replace lines (nitro's module paths are not published yet): " +
		"clone nitro and pass --nitro DIR or set $" + EnvNitroSrc + " to it (this binary was not built from a checkout that is still there)")
}

// isCheckout checks root holds nitro's cmd module.
func isCheckout(root string) error {
	mod, err := os.ReadFile(filepath.Join(root, "cmd", "go.mod"))
	if err != nil {
		return fmt.Errorf("no cmd/go.mod there (%w)", err)
	}
	if m := moduleLine.FindSubmatch(mod); m == nil || string(m[1]) != nitroModulePrefix+"cmd" {
		return fmt.Errorf("%s does not declare module %scmd", filepath.Join(root, "cmd", "go.mod"), nitroModulePrefix)
	}
	return nil
}

var (
	moduleLine = regexp.MustCompile(`(?m)^module\s+(\S+)`)
	goLine     = regexp.MustCompile(`(?m)^go\s+(\S+)`)
	validName  = regexp.MustCompile(`[^a-z0-9-]+`)
)

// projectFor fills the templates' values from dir's name, the module flag and the checkout's
// cmd/go.mod: its replace block lists every nitro module cmd reaches (it builds outside the
// workspace too), so the project replaces those and cmd itself.
func projectFor(dir, module, root string) (project, error) {
	base := filepath.Base(dir)
	if strings.ContainsFunc(dir, unicode.IsControl) {
		return project{}, fmt.Errorf("new: the directory %q holds a control character (a newline, a tab): name it with printable characters", dir)
	}
	name := strings.Trim(validName.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if name == "" {
		name = "experiment"
	}
	if module == "" {
		if err := checkModulePath(base); err != nil {
			return project{}, fmt.Errorf("new: the directory's name %q, the default module path, is no module path (%v): pass --module, e.g. --module example.com/you/%s", base, err, name)
		}
		module = base
	} else if err := checkModulePath(module); err != nil {
		return project{}, fmt.Errorf("new: --module %q is no module path (%v): want something like example.com/you/%s", module, err, name)
	}
	cmdMod := filepath.Join(root, "cmd", "go.mod")
	text, err := os.ReadFile(cmdMod)
	if err != nil {
		return project{}, fmt.Errorf("new: %w", err)
	}
	p := project{Module: module, Name: name, GoVersion: "1.26", NitroRoot: root}
	if m := goLine.FindSubmatch(text); m != nil {
		p.GoVersion = string(m[1])
	}
	requires, replaces := parseGoMod(text)
	p.Replaces = append(p.Replaces, modLine{Path: nitroModulePrefix + "cmd", Dir: filepath.Join(root, "cmd")})
	for mod, rel := range replaces {
		if strings.HasPrefix(mod, nitroModulePrefix) {
			p.Replaces = append(p.Replaces, modLine{Path: mod, Dir: filepath.Clean(filepath.Join(root, "cmd", rel))})
		}
	}
	sort.Slice(p.Replaces, func(i, j int) bool { return p.Replaces[i].Path < p.Replaces[j].Path })
	// What the generated code imports directly; tidy adds the rest.
	for _, mod := range []string{nitroModulePrefix + "cmd", nitroModulePrefix + "core", nitroModulePrefix + "markers", nitroModulePrefix + "prefetch", "github.com/gomlx/gomlx"} {
		v := requires[mod]
		if mod == nitroModulePrefix+"cmd" {
			v = "v0.0.0"
		}
		if v == "" {
			return project{}, fmt.Errorf("new: %s requires no %s, which the project imports: is the checkout %s complete?", cmdMod, mod, root)
		}
		p.Requires = append(p.Requires, modLine{Path: mod, Version: v})
	}
	return p, nil
}

// checkModulePath applies the rule go.mod puts on a module path: slash-separated elements, each
// non-empty, of ASCII letters, digits and - . _ ~, neither starting nor ending with a dot. A path
// that breaks it would be written into go.mod and fail only at the project's first build.
func checkModulePath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return errors.New("it must not be empty, nor start or end with /")
	}
	for _, elem := range strings.Split(p, "/") {
		switch {
		case elem == "":
			return errors.New("it holds an empty element (//)")
		case elem[0] == '.' || elem[len(elem)-1] == '.':
			return fmt.Errorf("its element %q starts or ends with a dot", elem)
		}
		for _, r := range elem {
			if !(r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r))) {
				return fmt.Errorf("%q is not allowed: only ASCII letters, digits and - . _ ~ between slashes", r)
			}
		}
	}
	return nil
}

// parseGoMod reads a go.mod's require versions and replace targets (single lines and blocks).
func parseGoMod(text []byte) (requires, replaces map[string]string) {
	requires, replaces = map[string]string{}, map[string]string{}
	block := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case f[0] == ")":
			block = ""
			continue
		case len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		case block == "" && (f[0] == "require" || f[0] == "replace"): // a one-line directive
			readModLine(f[1:], f[0], requires, replaces)
			continue
		}
		readModLine(f, block, requires, replaces)
	}
	return requires, replaces
}

func readModLine(f []string, directive string, requires, replaces map[string]string) {
	switch {
	case directive == "require" && len(f) >= 2:
		requires[f[0]] = f[1]
	case directive == "replace" && len(f) >= 3 && f[1] == "=>":
		replaces[f[0]] = f[2]
	}
}

// writeTemplates fills every template, then writes them into dir: a template that fails leaves
// no file behind. The actions are [[...]], since Go code is full of {{ and }}.
func writeTemplates(dir string, p project) error {
	const top = "templates/new"
	files := map[string][]byte{}
	err := fs.WalkDir(newTemplates, top, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(name, top+"/"), ".tmpl")
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		src, err := newTemplates.ReadFile(name)
		if err != nil {
			return err
		}
		t, err := template.New(rel).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("new: template %s: %w", rel, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, p); err != nil {
			return fmt.Errorf("new: template %s: %w", rel, err)
		}
		files[rel] = b.Bytes()
		return nil
	})
	if err != nil {
		return err
	}
	for rel, data := range files {
		out := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fmt.Errorf("new: %w", err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return fmt.Errorf("new: %w", err)
		}
	}
	return nil
}

// tidy runs `go mod tidy` in dir outside any workspace: offline first (GOPROXY=off: the module
// cache that built this checkout has every module it needs), then with the user's proxy.
func tidy(dir string, stderr io.Writer) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command on $PATH: %w", err)
	}
	run := func(extra ...string) ([]byte, error) {
		cmd := exec.Command(goBin, "mod", "tidy")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"GOWORK=off"}, extra...)...)
		return cmd.CombinedOutput()
	}
	out, err := run("GOPROXY=off")
	if err == nil {
		return nil
	}
	fmt.Fprintf(stderr, "nitro new: go mod tidy offline failed (%s); trying the module proxy\n", strings.TrimSpace(lastLine(out)))
	if out, err = run(); err != nil {
		return fmt.Errorf("%s", strings.TrimSpace(lastLine(out)))
	}
	return nil
}

func lastLine(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
