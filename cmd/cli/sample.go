package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// TextGenerator is what an experiment implements for nitro sample to continue text with it: the
// batch fields Forward reads (so the model is rebuilt from a checkpoint with no data), and a
// generate.Stepper over the model's weights, which the view offers only during the call.
type TextGenerator interface {
	GenerateSpecs() []prefetch.FieldSpec
	Stepper(m *core.ModelView) (generate.Stepper, error)
}

const sampleLong = `Continues --prompt with --tokens bytes drawn from a trained text generator (an experiment
with GenerateSpecs and Stepper methods: gpt), and prints the prompt followed by them, then a
newline, on stdout; what it loads and how long it took go to stderr. RUN is a run directory (its
newest checkpoint) or a checkpoint file.

Each byte is drawn from the model's next-byte distribution divided by --temperature, among the
--top-k most likely (0: all 256); --top-k 1 is greedy (the most likely byte; any temperature).
One --seed gives one text. The model keeps a key/value cache, so a byte costs one position;
past the model's context the window starts again from the last half of the text. A prompt
longer than the context is refused, not cut: give its last part.

The experiment is the registered one whose fields the checkpoint records (--experiment NAME
picks it where that is ambiguous). Nothing is written.`

type sampleFlags struct {
	prompt     string
	opts       generate.Options
	experiment string
	backend    string
}

func newSampleCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &sampleFlags{}
	c := &cobra.Command{
		Use:   "sample <run dir>|<checkpoint> [flags]",
		Short: "continue a prompt with a trained text generator (gpt), one seed one text",
		Long:  sampleLong,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("sample takes one run directory or checkpoint file, got %d arguments %v (e.g. nitro sample runs/GPT --prompt 'func ')", len(args), args)
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveDefault
		},
		RunE: func(c *cobra.Command, args []string) error { return runSample(args[0], f, stdout, stderr) },
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.prompt, "prompt", "", "the `TEXT` to continue (at least 1 byte, at most the model's context)")
	fs.IntVar(&f.opts.Tokens, "tokens", 200, "how many bytes to generate, `N` >= 1")
	fs.Float64Var(&f.opts.Temperature, "temperature", 1, "divide the logits by `T` > 0 before drawing: below 1 sharper, above 1 flatter (any value with --top-k 1)")
	fs.IntVar(&f.opts.TopK, "top-k", 0, fmt.Sprintf("draw among the `K` most likely bytes: 0 all, 1 greedy, at most %d", generate.MaxTopK))
	fs.Uint64Var(&f.opts.Seed, "seed", 1, "seed of the draws, `S`: one seed, one text")
	fs.StringVar(&f.experiment, "experiment", "", "the registered experiment `NAME` the checkpoint is of (default: the one whose fields it records)")
	fs.StringVar(&f.backend, "backend", "", "force a `BACKEND`: xla, cuda or go (default: cuda when its plugin is installed, else xla when the CPU plugin is)")
	return c
}

// runSample refuses bad flags, then a checkpoint that cannot be sampled, before it builds
// anything; the prompt's length against the context is checked once the model says its context,
// before the first step.
func runSample(arg string, f *sampleFlags, stdout, stderr io.Writer) error {
	if err := f.opts.Check(); err != nil {
		return err
	}
	if f.prompt == "" {
		return errors.New("--prompt is empty: give the text to continue, at least 1 byte")
	}
	file, err := sampleCheckpoint(arg)
	if err != nil {
		return err
	}
	hdr, err := checkpoint.Info(file)
	if err != nil {
		return err
	}
	name, ent, err := sampleExperiment(hdr, f.experiment, file)
	if err != nil {
		return err
	}
	x, err := ent.build("")
	if err != nil {
		return err
	}
	gen, ok := x.(TextGenerator)
	if !ok {
		return fmt.Errorf("experiment %s does not generate text: %s is its checkpoint, and nitro sample needs an experiment with GenerateSpecs and Stepper methods (cli.TextGenerator), such as gpt", name, file)
	}
	fmt.Fprintf(stderr, "nitro: sampling %d bytes from %s (experiment %s, step %d), seed %d\n", f.opts.Tokens, file, name, hdr.Step, f.opts.Seed)
	n, err := ent.fromCkpt(file, nil, core.WithBackend(f.backend), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(),
		core.WithInputSpecs(gen.GenerateSpecs()...), core.WithWarn(func(msg string) { fmt.Fprintln(stderr, "nitro:", msg) }))
	if err != nil {
		return err
	}
	var s generate.Stepper
	err = n.ViewModel("Sample", func(m *core.ModelView) error {
		var err error
		s, err = n.Experiment().(TextGenerator).Stepper(m)
		return err
	})
	if err != nil {
		return err
	}
	prompt := make([]int, len(f.prompt))
	for i := range len(f.prompt) {
		prompt[i] = int(f.prompt[i])
	}
	start := time.Now()
	out, err := generate.Generate(s, prompt, f.opts)
	if err != nil {
		return err
	}
	took := time.Since(start)
	text := make([]byte, len(out))
	for i, t := range out {
		text[i] = byte(t)
	}
	if _, err := fmt.Fprintf(stdout, "%s%s\n", f.prompt, text); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "nitro: %d bytes in %.2fs (%.2f ms a byte, the prompt's %d and the first step's compile included)\n",
		len(out), took.Seconds(), float64(took.Microseconds())/1e3/float64(len(out)), len(prompt))
	return nil
}

// sampleCheckpoint is the checkpoint file arg names: itself, or a run directory's newest.
func sampleCheckpoint(arg string) (string, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return "", fmt.Errorf("sample %s: no run directory or checkpoint file there (%v)", arg, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return arg, nil
	}
	file, err := core.NewestCheckpoint(arg)
	if err != nil {
		return "", fmt.Errorf("sample %s: %w: give a run directory that holds a checkpoint (nitro ls %s lists them; a run with --no-checkpoints keeps none), or a checkpoint file", arg, err, arg)
	}
	return file, nil
}

// sampleExperiment is the registered experiment the checkpoint is of: the one named, else the
// one whose fields include every field the record holds, preferring the one with no others.
func sampleExperiment(hdr *checkpoint.Header, named, file string) (string, entry, error) {
	if named != "" {
		e, err := lookup(named)
		if err != nil {
			return "", e, fmt.Errorf("--experiment: %w", err)
		}
		return named, e, nil
	}
	var recorded []string
	for _, m := range []map[string]string{hdr.Values.GraphConst, hdr.Values.Device, hdr.Values.Host} {
		for k := range m {
			recorded = append(recorded, k)
		}
	}
	slices.Sort(recorded)
	var exact, wider []string
	for _, name := range sortedNames() {
		x, err := registry[name].build("")
		if err != nil {
			continue // an experiment that cannot be built cannot be this checkpoint's either
		}
		fields, err := markers.ConfigMetadata(x)
		if err != nil {
			continue
		}
		has := map[string]bool{}
		for _, fl := range fields {
			has[fl.Name] = true
		}
		if !allIn(recorded, has) {
			continue
		}
		if len(has) == len(recorded) {
			exact = append(exact, name)
		} else {
			wider = append(wider, name)
		}
	}
	candidates := exact
	if len(candidates) == 0 {
		candidates = wider
	}
	switch len(candidates) {
	case 1:
		return candidates[0], registry[candidates[0]], nil
	case 0:
		return "", entry{}, fmt.Errorf("the checkpoint %s records the fields %s, which no registered experiment has all of: name its experiment with --experiment (registered: %s)",
			file, strings.Join(recorded, ", "), strings.Join(sortedNames(), ", "))
	}
	return "", entry{}, fmt.Errorf("the checkpoint %s records fields that experiments %s all have: name one with --experiment", file, strings.Join(candidates, ", "))
}

func allIn(names []string, set map[string]bool) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}
