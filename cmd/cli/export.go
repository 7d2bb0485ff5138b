package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gomlx/gopjrt/dtypes"
	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/promexport"
)

const exportLong = `Builds the experiment a checkpoint was trained with (--checkpoint FILE, or a run dir: its
newest), from the preset and values it records, with its weights, and writes it as an export
bundle into --out: one StableHLO program per batch size (--batch-sizes),
the weights in safetensors, and a manifest with the inputs, outputs and provenance (see the
exportbundle package). The provenance names the checkpoint file restored (a run dir's newest,
with the run dir as checkpoint_arg) and the sha256 of its bytes. Nothing is trained, logged or
checkpointed. A --preset, or a --set of a GraphConst field, that contradicts the checkpoint is
refused; --weights-only builds the experiment from --preset and --set instead and loads the
checkpoint's weights into it.

The inputs' dtypes and shapes come from the experiment's data (BuildData runs, as for
evaluate), or, with --input-spec, from the specs alone: then BuildData is not called and no data
is read at all. It prints the bundle's folder, the weights' file and sha256, its batch sizes,
inputs and outputs, and its files.

A text generator (an experiment with a decode step: gpt) is exported as its decode step instead
of Forward: one program at batch size 1 that takes a token, its position and the key/value
caches and returns the next token's logits and the caches, with a generator entry in the
manifest. No data is read, and --input-spec and --batch-sizes do not apply. nitro serve answers
a prompt with such a bundle's continuation. --forward exports its Forward instead, as for any
other experiment.`

const runBundleLong = `Loads an export bundle with gopjrt alone (no experiment code), runs it once on the inputs given
as JSON, and prints the outputs as JSON on stdout: {"outputs": {"<name>": <nested arrays>}}.

The inputs are {"inputs": {"<name>": <nested arrays>}}, batch-first, from --inputs FILE (- or no
flag: standard input), or one input per --input NAME=FILE, each file holding that input's nested
arrays. The batch size is the inputs' leading length; it must be one the bundle was exported at.
The JSON is exactly what POST /predict of nitro serve takes and answers.`

const serveLong = `Loads export bundles with gopjrt alone and serves them on --addr over the Open Inference
Protocol (KServe v2, as Triton's and KServe's clients speak it): GET /v2/health/live,
/v2/health/ready, /v2, /v2/models/NAME[/versions/1][/ready], and
POST /v2/models/NAME[/versions/1]/infer, with the binary tensor data extension. Given a folder of
bundles (a model repository: every folder under it holding a manifest.json), it serves each by its
manifest name, refuses two bundles of one name, and prints each model it serves. It prints the
address it listens on (port 0 picks one) and runs until SIGINT or SIGTERM, then stops accepting,
finishes the requests in flight and exits.

A text generator's bundle (nitro export gpt) is served as a model that continues a prompt: input
"prompt" (BYTES [1], the text, or UINT8 [n], its bytes, at most the model's context), parameters
max_tokens (or tokens; default 200, at most 4096), temperature (1), top_k (0: all; 1 greedy) and
seed (1), as nitro sample's flags; outputs "text" (BYTES [1]) and "tokens" (UINT8 [n]), the
bytes drawn, the same as nitro sample's for the same seed. A bad prompt or parameter is a 400
naming it.

Serving one bundle (not a text generator), it also answers POST /predict: the body is {"inputs": {"<name>": <nested
arrays>}}, batch-first, the answer {"outputs": {...}}. A malformed body, a missing or unknown
input, a wrong shape or dtype is a 400 naming the input.

--metrics-addr serves Prometheus metrics on their own address, as train's does: a scrape never
waits behind the inference bounds, and the inference port shows clients nothing of the server.
Every request is counted, by model and kind (protocol: predict, v2 for infer, health,
server_metadata, model_metadata, model_ready, other).

A client cannot take it down: a body is read as a stream and refused (400) at the first byte that
breaks the bundle's declared shapes, so a request costs at most its largest batch in memory,
whatever the body's size (the rest is read and dropped after the answer, so that a client that
reads only once it has sent everything gets the 400 too). Reading bodies and running requests
are bounded apart, so slow clients cannot starve the runs: at most --max-reading bodies hold a
read slot (reading, or waiting decoded to run) and at most --max-concurrent requests run at once,
the others waiting. Past the read slots a request reads on trial for 200ms (as many trials as
slots): a body that arrives by then runs, one still arriving takes the slot of a body under half
its rate (answered 503 with Retry-After) or is answered 503 itself, so slow clients cannot keep
fast ones out either. A client that stalls is cut by the header, read and body timeouts, one
that trickles its body by --min-body-rate. At a signal serve stops accepting; a request begun
(its first byte arrived) is answered if its client finishes sending it within --shutdown-stall,
and cut then otherwise, however slowly it sends; a connection with no request begun is closed.
serve says how many it cut and exits 0 once every request it read is answered; it exits 1 only
if one is still running after 30s.`

// exportFlags are the flags of nitro export.
type exportFlags struct {
	preset     string
	sets       []string
	checkpoint string
	out        string
	name       string
	batches    []int
	provRoot   string
	inputSpecs []string
	backend    string
	// weightsOnly builds from the flags instead of the checkpoint's record (fromckpt.go).
	weightsOnly bool
	// forward exports a text generator's Forward rather than its decode step.
	forward bool
}

func newExportCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &exportFlags{}
	c := &cobra.Command{
		Use:               "export <experiment> --checkpoint PATH|RUN_DIR --out DIR",
		Short:             "write a checkpoint's model as an export bundle (StableHLO programs, safetensors weights, manifest)",
		Long:              exportLong,
		ValidArgsFunction: experimentNames,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("export needs an experiment name; registered: %s", strings.Join(sortedNames(), ", "))
			}
			if len(args) > 1 {
				return fmt.Errorf("unexpected arguments %v (export takes one experiment name; flags may go before or after it)", args[1:])
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runExport(c, args[0], f, stdout, stderr) },
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.checkpoint, "checkpoint", "", "export the weights of this checkpoint `PATH`, or of a RUN_DIR's newest (required)")
	fs.StringVar(&f.out, "out", "", "the bundle folder `DIR` to write (must not exist, or be empty; the folders above it are made; required)")
	fs.IntSliceVar(&f.batches, "batch-sizes", []int{1}, "the batch `SIZES` to compile, one program each (e.g. 1,32)")
	fs.StringVar(&f.name, "name", "", "the bundle's `NAME`, recorded in its manifest (default: the base name of --out)")
	fs.StringVar(&f.preset, "preset", "", "the experiment's preset `NAME` (default: the one the checkpoint records)")
	fs.StringArrayVar(&f.sets, "set", nil, "override an experiment field: `FIELD=VALUE` (repeatable; default: the values the checkpoint records)")
	fs.BoolVar(&f.weightsOnly, "weights-only", false, weightsOnlyUsage)
	fs.StringArrayVar(&f.inputSpecs, "input-spec", nil, "declare a batch field instead of reading data: `NAME=DTYPE:DIMS`, DIMS per row joined by x (image=float32:784, img=uint8:28x28x1; repeatable)")
	fs.BoolVar(&f.forward, "forward", false, "export a text generator's Forward (a whole window's logits) instead of its decode step")
	fs.StringVar(&f.provRoot, "provenance-root", "", "record the git state (commit, tree, patch) of the repository holding `DIR` in the bundle")
	fs.StringVar(&f.backend, "backend", "", "the `BACKEND` the weights are loaded on: xla or go (the programs always compile through the XLA plugin)")
	c.SetFlagErrorFunc(flagError)
	_ = c.RegisterFlagCompletionFunc("backend", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"xla", "go"}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = c.MarkFlagDirname("out")
	_ = c.MarkFlagDirname("provenance-root")
	return c
}

func runExport(c *cobra.Command, expName string, f *exportFlags, stdout, stderr io.Writer) error {
	ent, err := lookup(expName)
	if err != nil {
		return err
	}
	for _, name := range []string{"checkpoint", "out", "name", "preset", "provenance-root", "backend"} {
		if fl := c.Flags().Lookup(name); fl.Changed && fl.Value.String() == "" {
			return fmt.Errorf("--%s: empty value", name)
		}
	}
	if f.checkpoint == "" {
		return errors.New("export needs --checkpoint PATH|RUN_DIR: the weights to export (a checkpoint file, or a run dir: its newest)")
	}
	if f.out == "" {
		return errors.New("export needs --out DIR: the bundle folder to write")
	}
	for _, b := range f.batches {
		if b < 1 {
			return fmt.Errorf("--batch-sizes %v: each batch size is at least 1", f.batches)
		}
	}
	specs, err := parseInputSpecs(f.inputSpecs)
	if err != nil {
		return err
	}
	var gen TextGenerator
	if !f.forward {
		if gen, err = exportsGenerator(ent, c, specs); err != nil {
			return err
		}
	}
	if gen != nil {
		specs = gen.GenerateSpecs() // the step reads no data, and Forward's batch is declared
	}
	withDist, err := exportDist() // dist.go: a rank other than 0 is refused (only rank 0 exports)
	if err != nil {
		return err
	}
	name := f.name
	if name == "" {
		name = filepath.Base(filepath.Clean(f.out))
	}
	opts := []core.Option{
		core.WithBackend(f.backend), core.WithoutLogger(), core.WithoutCheckpoints(), withDist,
		core.WithConsole(noticeConsole{stderr}), core.WithWarn(func(msg string) { fmt.Fprintln(stderr, "nitro: warning:", msg) }),
	}
	if specs != nil {
		opts = append(opts, core.WithInputSpecs(specs...))
	}
	if f.preset != "" {
		opts = append(opts, core.WithPreset(f.preset))
	}
	n, err := exportNitro(ent, f, opts)
	if err != nil && specs != nil {
		return specMisfit(ent, f, specs, err)
	}
	if err != nil {
		return err
	}
	// The folders above --out are made as mkdir -p would: --out repo/mnist into a repo not yet
	// there writes repo/mnist rather than failing on repo's stat.
	if parent := filepath.Dir(filepath.Clean(f.out)); parent != "." {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("--out %s: making its parent folder: %w", f.out, err)
		}
	}
	var b *exportbundle.Bundle
	if gen != nil {
		b, err = export.ExportGenerator(n, f.out, export.ExportSpec{Name: name, ProvenanceRoot: f.provRoot})
	} else {
		b, err = export.Export(n, f.out, export.ExportSpec{Name: name, BatchSizes: f.batches, ProvenanceRoot: f.provRoot})
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bundle: %s\n", f.out)
	if g := b.Generator; g != nil {
		fmt.Fprintf(stdout, "text generator: context %d, vocabulary %d, %d state tensors (nitro serve answers a prompt)\n", g.Context, g.Vocab, len(g.State))
	}
	// The file restored, not the --checkpoint given: a run dir names whichever file is its newest.
	if p := b.Provenance["checkpoint"]; p != "" {
		fmt.Fprintf(stdout, "weights: %s (sha256 %s)\n", p, b.Provenance["checkpoint_sha256"])
	}
	fmt.Fprintf(stdout, "batch sizes: %s\n", joinInts(b.BatchSizes()))
	for _, s := range b.Inputs {
		fmt.Fprintf(stdout, "input:  %s %s %v\n", s.Name, s.DType, s.Shape)
	}
	for _, s := range b.Outputs {
		fmt.Fprintf(stdout, "output: %s %s %v\n", s.Name, s.DType, s.Shape)
	}
	entries, err := os.ReadDir(f.out)
	if err != nil {
		return err
	}
	for _, de := range entries {
		fi, err := de.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "file:   %s (%d bytes)\n", filepath.Join(f.out, de.Name()), fi.Size())
	}
	return nil
}

// exportsGenerator is the experiment as a text generator when it is one (a decode step to export,
// and the batch to rebuild it with no data): its bundle is then the step, whose inputs and batch
// size are fixed, so --input-spec and --batch-sizes other than 1 are refused by name.
func exportsGenerator(ent entry, c *cobra.Command, specs []prefetch.FieldSpec) (TextGenerator, error) {
	x, err := ent.build("")
	if err != nil {
		return nil, err
	}
	gen, ok := x.(TextGenerator)
	if _, steps := x.(export.StepExporter); !ok || !steps {
		return nil, nil
	}
	if specs != nil {
		return nil, fmt.Errorf("--input-spec: experiment %s is exported as a text generator, whose inputs are its decode step's (token, position, caches): drop the flag, or add --forward to export its Forward", ent.name)
	}
	if fl := c.Flags().Lookup("batch-sizes"); fl.Changed && fl.Value.String() != "[1]" {
		return nil, fmt.Errorf("--batch-sizes %s: experiment %s is exported as a text generator, whose decode step runs one sequence at batch size 1: drop the flag, or add --forward to export its Forward", fl.Value, ent.name)
	}
	return gen, nil
}

// exportNitro builds the experiment the checkpoint was trained with, its weights loaded; with
// --weights-only, the one the flags give, the checkpoint's weights loaded into it.
func exportNitro(ent entry, f *exportFlags, opts []core.Option) (*core.Nitro, error) {
	if !f.weightsOnly {
		n, err := ent.fromCkpt(f.checkpoint, f.sets, opts...)
		return n, flagContradiction(err, f.sets)
	}
	e, err := ent.configure(f.preset, f.sets)
	if err != nil {
		return nil, err
	}
	return core.New(e, append(opts, core.WithCheckpoint(f.checkpoint))...)
}

// noticeConsole prints a Nitro's notices (where the weights came from, a GraphConst that
// differs from the checkpoint's) on stderr, and nothing else.
type noticeConsole struct{ w io.Writer }

var _ core.Console = noticeConsole{}

func (noticeConsole) Reports(string, string)      {}
func (noticeConsole) Epoch(core.EpochResult, int) {}
func (c noticeConsole) Notice(msg string)         { fmt.Fprintln(c.w, "nitro:", msg) }

// joinInts is "1 32" for [1 32].
func joinInts(xs []int) string { return strings.Trim(fmt.Sprint(xs), "[]") }

// parseInputSpecs parses --input-spec values, NAME=DTYPE:DIMS (DIMS per row, joined by x; empty
// for one scalar per row). It returns nil when there are none.
func parseInputSpecs(values []string) ([]prefetch.FieldSpec, error) {
	var specs []prefetch.FieldSpec
	for _, v := range values {
		bad := func(why string) error {
			return fmt.Errorf("--input-spec %q: %s (want NAME=DTYPE:DIMS, e.g. image=float32:784 or img=uint8:28x28x1)", v, why)
		}
		name, rest, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, bad("no NAME=")
		}
		dt, dims, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, bad("no :DIMS")
		}
		d, ok := dtypeNamed(dt)
		if !ok {
			return nil, bad(fmt.Sprintf("unknown dtype %q", dt))
		}
		s := prefetch.FieldSpec{Name: name, DType: d, Shape: []int{}}
		if dims != "" {
			for _, x := range strings.Split(dims, "x") {
				k, err := strconv.Atoi(x)
				if err != nil || k < 1 {
					return nil, bad(fmt.Sprintf("dimension %q is not a positive integer", x))
				}
				s.Shape = append(s.Shape, k)
			}
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// dtypeNamed finds a dtype by its GoMLX name, in any case (float32, Float32, uint8, bfloat16).
func dtypeNamed(name string) (dtypes.DType, bool) {
	for k, d := range dtypes.MapOfNames {
		if strings.EqualFold(k, name) && d != dtypes.InvalidDType {
			return d, true
		}
	}
	return dtypes.InvalidDType, false
}

// openBundle loads a bundle on the XLA PJRT plugin nitro finds (backend.FindPlugin).
func openBundle(dir string) (*exportbundle.Runner, error) {
	plugin, searched, err := backend.FindPlugin()
	if err != nil {
		return nil, fmt.Errorf("running a bundle needs the XLA CPU PJRT plugin: %w", err)
	}
	if plugin == "" {
		return nil, fmt.Errorf("running a bundle needs the XLA CPU PJRT plugin, and none was found (searched %s): %s", strings.Join(searched, ", "), backend.SetupHint)
	}
	return exportbundle.Open(dir, plugin)
}

// openRepository opens every bundle under dir (dir itself when it is one), refusing two of one
// name: a model is served by its manifest name. It returns the runners opened so far even on an
// error, for the caller to close.
func openRepository(dir string) ([]*exportbundle.Runner, []string, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("serve %s: the path does not exist: give an export bundle's folder (nitro export --out writes one) or a folder of bundles", dir)
	}
	dirs, err := exportbundle.FindBundles(dir)
	if err != nil {
		return nil, nil, err
	}
	var rs []*exportbundle.Runner
	from := map[string]string{}
	for _, d := range dirs {
		r, err := openBundle(d)
		if err != nil {
			return rs, nil, fmt.Errorf("%s: %w", d, err)
		}
		rs = append(rs, r)
		if first, dup := from[r.Name()]; dup {
			return rs, nil, fmt.Errorf("two bundles are named %q (%s and %s): a model is served by its manifest name: export one again with another --name, or serve them apart", r.Name(), first, d)
		}
		from[r.Name()] = d
	}
	return rs, dirs, nil
}

func newRunBundleCmd(stdout io.Writer) *cobra.Command {
	var inputsFile string
	var inputs []string
	c := &cobra.Command{
		Use:   "run-bundle <bundle dir> [--inputs FILE|-] [--input NAME=FILE]...",
		Short: "run an export bundle once on JSON inputs and print its outputs as JSON",
		Long:  runBundleLong,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("run-bundle needs one bundle folder (nitro export writes one), got %d arguments", len(args))
			}
			return nil
		},
		DisableFlagsInUseLine: true,
		ValidArgsFunction:     dirsOnly,
		RunE: func(c *cobra.Command, args []string) error {
			if len(inputs) > 0 && c.Flags().Changed("inputs") {
				return errors.New("--inputs and --input both given: pass the whole request in one file, or each input in its own")
			}
			body, err := requestBody(c.InOrStdin(), inputsFile, inputs, c.Flags().Changed("inputs"))
			if err != nil {
				return err
			}
			r, err := openBundle(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			if err := exportbundle.CheckProgramInputs(r); err != nil {
				return err
			}
			// The same decoding, checks and encoding as nitro serve's /predict.
			return exportbundle.RunJSON(r, bytes.NewReader(body), stdout)
		},
	}
	c.Flags().SortFlags = false
	c.Flags().StringVar(&inputsFile, "inputs", "-", `read {"inputs": {...}} from `+"`FILE`"+` (- is standard input)`)
	c.Flags().StringArrayVar(&inputs, "input", nil, "read one input's nested arrays from a file: `NAME=FILE` (repeatable)")
	_ = c.MarkFlagFilename("inputs", "json")
	return c
}

// inputsHint says every way run-bundle takes its inputs, for the errors about a missing one.
const inputsHint = `pass the request with --inputs FILE, a JSON {"inputs": {"<name>": <nested arrays>}}, batch-first; pipe it on standard input (nitro run-bundle DIR < request.json, or --inputs - to type it); or give each input's nested arrays with --input NAME=FILE`

// requestBody is the /predict body: the --inputs file (or stdin) as it is, or one built from the
// --input NAME=FILE files. No input at all is refused naming the flags, before the bundle is
// loaded: without --inputs, a terminal on stdin would wait for a request the user does not know
// to type, and an empty stdin would reach the decoder as a bare EOF.
func requestBody(stdin io.Reader, file string, inputs []string, explicit bool) ([]byte, error) {
	if len(inputs) == 0 {
		if file == "-" {
			if f, ok := stdin.(*os.File); ok && !explicit {
				if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
					return nil, errors.New("run-bundle: no inputs given, and standard input is a terminal or device, not a request: " + inputsHint)
				}
			}
			b, err := io.ReadAll(io.LimitReader(stdin, exportbundle.MaxRequestBytes+1))
			if err != nil {
				return nil, fmt.Errorf("reading the inputs from standard input: %w", err)
			}
			if len(bytes.TrimSpace(b)) == 0 {
				return nil, errors.New("run-bundle: no inputs: standard input was empty: " + inputsHint)
			}
			return b, nil
		}
		b, err := readLimited(file, "--inputs")
		if err == nil && len(bytes.TrimSpace(b)) == 0 {
			return nil, fmt.Errorf("--inputs %s: the file is empty: %s", file, inputsHint)
		}
		return b, err
	}
	m := map[string]json.RawMessage{}
	for _, in := range inputs {
		name, path, ok := strings.Cut(in, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--input %q: want NAME=FILE", in)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("--input %s given twice", name)
		}
		b, err := readLimited(path, "--input "+name)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("--input %s: %s is not JSON", name, path)
		}
		m[name] = bytes.TrimSpace(b)
	}
	return json.Marshal(map[string]any{"inputs": m})
}

func readLimited(path, flag string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, exportbundle.MaxRequestBytes+1))
}

// shutdownGrace bounds how long serve waits for the requests in flight after a signal.
const shutdownGrace = 30 * time.Second

// minServeTimeout is the least timeout serve accepts: below it the flag can only be a slip of the
// unit (1ns for 1s).
const minServeTimeout = time.Millisecond

// The serve metrics are told by the server through its observer interface.
var _ exportbundle.ServeObserver = (*promexport.ServeMetrics)(nil)

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
	var addr, metricsAddr string
	cfg := exportbundle.DefaultServeConfig()
	c := &cobra.Command{
		Use:                   "serve <bundle dir | model repository> [--addr ADDR] [--max-concurrent N] [--max-reading N] [--read-timeout D] ...",
		Short:                 "serve export bundles (a model repository) on the Open Inference Protocol (and one bundle on POST /predict) until SIGINT or SIGTERM",
		Long:                  serveLong,
		DisableFlagsInUseLine: true,
		ValidArgsFunction:     dirsOnly,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("serve needs one bundle folder (nitro export writes one) or a folder of them, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if addr == "" {
				return errors.New("--addr: empty value (e.g. 127.0.0.1:8080; port 0 picks one)")
			}
			if cfg.MaxConcurrent < 1 {
				return fmt.Errorf("--max-concurrent %d: at least 1 request at a time", cfg.MaxConcurrent)
			}
			if cfg.MaxReading < 1 {
				return fmt.Errorf("--max-reading %d: at least 1 body at a time (default %d)", cfg.MaxReading, exportbundle.DefaultMaxReading)
			}
			if cfg.MinBodyRate < 1 {
				return fmt.Errorf("--min-body-rate %d: at least 1 byte/s (default %d)", cfg.MinBodyRate, exportbundle.DefaultServeConfig().MinBodyRate)
			}
			for _, d := range []struct {
				flag string
				v    time.Duration
			}{{"read-header-timeout", cfg.ReadHeaderTimeout}, {"read-timeout", cfg.ReadTimeout}, {"body-timeout", cfg.BodyTimeout},
				{"write-timeout", cfg.WriteTimeout}, {"idle-timeout", cfg.IdleTimeout}, {"shutdown-stall", cfg.ShutdownStall}} {
				if d.v <= 0 {
					return fmt.Errorf("--%s %v: a timeout is positive (e.g. 10s)", d.flag, d.v)
				}
				if d.v < minServeTimeout { // 1ns was accepted, and then no answer could ever be written
					return fmt.Errorf("--%s %v: under %v no request could be served in time: give a timeout such as 10s", d.flag, d.v, minServeTimeout)
				}
			}
			rs, dirs, err := openRepository(args[0])
			for _, r := range rs {
				defer r.Close()
			}
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if metricsAddr != "" {
				m, err := promexport.NewServeMetrics(promexport.Options{Addr: metricsAddr})
				if err != nil {
					return fmt.Errorf("--metrics-addr: %w", err)
				}
				defer m.Close()
				cfg.Observer = m
				fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", m.Addr())
			}
			srv, bound, err := exportbundle.ServeModels(rs, addr, cfg)
			if err != nil {
				return err
			}
			if len(rs) == 1 && rs[0].Generator() == nil {
				fmt.Fprintf(stdout, "serving %s (batch sizes %s) on http://%s/predict\n", rs[0].Name(), joinInts(rs[0].BatchSizes()), bound)
			}
			for i, r := range rs {
				if g := r.Generator(); g != nil {
					fmt.Fprintf(stdout, "serving %s (text generator, context %d, from %s) on http://%s/v2/models/%s/infer\n", r.Name(), g.Context, dirs[i], bound, r.Name())
					continue
				}
				fmt.Fprintf(stdout, "serving %s (batch sizes %s, from %s) on http://%s/v2/models/%s/infer\n", r.Name(), joinInts(r.BatchSizes()), dirs[i], bound, r.Name())
			}
			<-ctx.Done()
			stop() // a second signal kills, as usual
			fmt.Fprintln(stderr, "nitro: serve: stopping (finishing the requests in flight)")
			sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			err = srv.Shutdown(sctx)
			// Cutting a client still sending its request, or an idle keep-alive one, is a clean
			// stop: every request the server had read was answered.
			if unread, idle := srv.Cut(); unread > 0 || idle > 0 {
				fmt.Fprintf(stderr, "nitro: serve: cut %d connection(s) mid-request (still sending %v after the signal) and %d idle keep-alive connection(s)\n", unread, cfg.ShutdownStall, idle)
			}
			if err != nil {
				srv.Close()
				return fmt.Errorf("serve: shutting down: requests still running after %v: %w", shutdownGrace, err)
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "listen on `ADDR` (host:port; port 0 picks one)")
	fs.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics (requests, failures, latency per model, in flight, rejected by a bound) on http://`ADDR`/metrics, apart from --addr")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "run at most `N` requests at once; requests whose body is read wait for one to finish")
	fs.IntVar(&cfg.MaxReading, "max-reading", cfg.MaxReading, "read at most `N` request bodies at once (each holds up to the bundle's largest batch); more read on trial for 200ms, the faster body keeping a slot, and past those are answered 503 with Retry-After")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", cfg.ReadHeaderTimeout, "cut a client whose request headers take longer than `D`")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", cfg.ReadTimeout, "cut a client whose whole request (headers and body) takes longer than `D`")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", cfg.BodyTimeout, "cut a client whose request body sends nothing for `D` (408)")
	fs.IntVar(&cfg.MinBodyRate, "min-body-rate", cfg.MinBodyRate, "cut a body (408) averaging under `N` bytes/s once --body-timeout has passed since it began")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "give up on an answer not written `D` after its request's headers")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "close a keep-alive connection idle for `D`")
	fs.DurationVar(&cfg.ShutdownStall, "shutdown-stall", cfg.ShutdownStall, "at SIGINT/SIGTERM, answer a request begun whose client finishes sending it within `D`, and cut one still sending then, however fast it sends")
	c.SetFlagErrorFunc(flagError)
	return c
}
