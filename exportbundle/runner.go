package exportbundle

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gomlx/gopjrt/dtypes"
	"github.com/gomlx/gopjrt/pjrt"
	"github.com/nitro-go/nitro/tensorfile"
)

// InputError is a Run refused because of what the caller passed: Input names the input at fault
// ("" when the fault is the batch size).
type InputError struct {
	Input string
	Msg   string
}

func (e *InputError) Error() string {
	if e.Input == "" {
		return "exportbundle: " + e.Msg
	}
	return fmt.Sprintf("exportbundle: input %q: %s", e.Input, e.Msg)
}

// Runner executes a bundle's programs on a PJRT plugin through gopjrt alone: no GoMLX, no model
// code. The weights are uploaded once, at Open; each batch size's program is compiled on its first
// Run. A Runner is safe for concurrent use; Close waits for the Runs in flight.
type Runner struct {
	b       *Bundle
	client  *pjrt.Client
	weights []*pjrt.Buffer

	life   sync.RWMutex // Run holds it for reading, Close for writing
	closed bool

	mu    sync.Mutex // guards execs
	execs map[int]*compiled
}

type compiled struct {
	once sync.Once
	exec *pjrt.LoadedExecutable
	err  error
}

// Open reads and verifies the bundle at dir (see Read) and prepares it to run on plugin: a PJRT
// plugin path, or a name gopjrt looks up in $PJRT_PLUGIN_LIBRARY_PATH ("" means "cpu").
func Open(dir, plugin string) (*Runner, error) {
	b, err := Read(dir)
	if err != nil {
		return nil, err
	}
	return NewRunner(b, plugin)
}

// NewRunner prepares an in-memory bundle (as Read returns it) to run on plugin, as Open does.
func NewRunner(b *Bundle, plugin string) (*Runner, error) {
	if b == nil {
		return nil, errors.New("exportbundle: NewRunner: nil bundle")
	}
	if _, _, err := b.encode(false); err != nil { // the same rules as Write and Read
		return nil, fmt.Errorf("exportbundle: NewRunner: %w", err)
	}
	if plugin == "" {
		plugin = "cpu"
	}
	p, err := pjrt.GetPlugin(plugin)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: PJRT plugin %s: %w", plugin, err)
	}
	client, err := p.NewClient(nil)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: PJRT client on %s: %w", plugin, err)
	}
	r := &Runner{b: b, client: client, execs: map[int]*compiled{}}
	for _, w := range b.Weights {
		buf, err := toDevice(client, w.Tensor)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("exportbundle: weight %q to the device: %w", w.Name, err)
		}
		r.weights = append(r.weights, buf)
	}
	return r, nil
}

func toDevice(c *pjrt.Client, t Tensor) (*pjrt.Buffer, error) {
	return c.BufferFromHost().FromRawData(t.Data, t.DType.PJRT(), t.Shape).Done()
}

// Name is the bundle's name.
func (r *Runner) Name() string { return r.b.Name }

// Inputs returns the input specs, in argument order.
func (r *Runner) Inputs() []TensorSpec { return slices.Clone(r.b.Inputs) }

// Outputs returns the output specs, in the program's order.
func (r *Runner) Outputs() []TensorSpec { return slices.Clone(r.b.Outputs) }

// BatchSizes returns the batch sizes Run accepts, ascending.
func (r *Runner) BatchSizes() []int { return r.b.BatchSizes() }

// Provenance returns a copy of the bundle's provenance.
func (r *Runner) Provenance() map[string]string { return maps.Clone(r.b.Provenance) }

// Run executes the program for batch size batch on inputs, which must hold exactly the bundle's
// inputs by name, each of its declared dtype and of its declared shape with batch at the batch
// axis, and returns the outputs by name. A refused input is an *InputError naming it.
func (r *Runner) Run(batch int, inputs map[string]Tensor) (map[string]Tensor, error) {
	r.life.RLock()
	defer r.life.RUnlock()
	if r.closed {
		return nil, errors.New("exportbundle: Run on a closed Runner")
	}
	if _, ok := r.b.Programs[batch]; !ok {
		return nil, &InputError{Msg: fmt.Sprintf("batch size %d: the bundle has programs for batch sizes %v: send batches of those sizes (split or pad the request), or export again with %d among the batch sizes (nitro export --batch-sizes)", batch, r.BatchSizes(), batch)}
	}
	if err := r.checkInputs(batch, inputs); err != nil {
		return nil, err
	}
	exec, err := r.executable(batch)
	if err != nil {
		return nil, err
	}
	ins := make([]*pjrt.Buffer, 0, len(r.b.Inputs))
	defer func() {
		for _, b := range ins {
			b.Destroy()
		}
	}()
	for _, spec := range r.b.Inputs {
		buf, err := toDevice(r.client, inputs[spec.Name])
		if err != nil {
			return nil, fmt.Errorf("exportbundle: input %q to the device: %w", spec.Name, err)
		}
		ins = append(ins, buf)
	}
	args := append(slices.Clone(ins), r.weights...)
	outs, err := exec.Execute(args...).DonateNone().Done()
	if err != nil {
		return nil, fmt.Errorf("exportbundle: executing the batch-%d program: %w", batch, err)
	}
	defer func() {
		for _, o := range outs {
			o.Destroy()
		}
	}()
	if len(outs) != len(r.b.Outputs) {
		return nil, fmt.Errorf("exportbundle: the batch-%d program returned %d outputs, the manifest lists %d", batch, len(outs), len(r.b.Outputs))
	}
	result := make(map[string]Tensor, len(outs))
	for i, spec := range r.b.Outputs {
		t, err := fromDevice(outs[i])
		if err != nil {
			return nil, fmt.Errorf("exportbundle: output %q: %w", spec.Name, err)
		}
		if want := spec.ShapeAt(batch); t.DType != spec.DType || !slices.Equal(t.Shape, want) {
			return nil, fmt.Errorf("exportbundle: output %q: the program returned %s%v, the manifest says %s%v", spec.Name, t.DType, t.Shape, spec.DType, want)
		}
		result[spec.Name] = t
	}
	return result, nil
}

func (r *Runner) checkInputs(batch int, inputs map[string]Tensor) error {
	declared := make(map[string]bool, len(r.b.Inputs))
	var names []string
	for _, s := range r.b.Inputs {
		declared[s.Name] = true
		names = append(names, s.Name)
	}
	var unknown []string
	for name := range inputs {
		if !declared[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &InputError{Input: unknown[0], Msg: fmt.Sprintf("not an input of this bundle (it takes %s)", strings.Join(names, ", "))}
	}
	for _, spec := range r.b.Inputs {
		t, ok := inputs[spec.Name]
		if !ok {
			return &InputError{Input: spec.Name, Msg: "missing"}
		}
		if t.DType != spec.DType {
			return &InputError{Input: spec.Name, Msg: fmt.Sprintf("dtype %s, the bundle takes %s", t.DType, spec.DType)}
		}
		if want := spec.ShapeAt(batch); !slices.Equal(t.Shape, want) {
			return &InputError{Input: spec.Name, Msg: fmt.Sprintf("shape %v, the bundle takes %v at batch size %d", t.Shape, want, batch)}
		}
		if err := t.check(); err != nil {
			return &InputError{Input: spec.Name, Msg: err.Error()}
		}
	}
	return nil
}

// executable compiles the program for batch once; a failure is remembered, not retried.
func (r *Runner) executable(batch int) (*pjrt.LoadedExecutable, error) {
	r.mu.Lock()
	c := r.execs[batch]
	if c == nil {
		c = &compiled{}
		r.execs[batch] = c
	}
	r.mu.Unlock()
	c.once.Do(func() {
		p := r.b.Programs[batch]
		cfg := r.client.Compile()
		switch p.Format {
		case "mlir":
			cfg = cfg.WithStableHLO(p.Code)
		case "hlo":
			cfg = cfg.WithHLO(p.Code)
		}
		file := programFileName(batch, p.Format)
		exec, err := cfg.Done()
		if err != nil {
			c.err = fmt.Errorf("exportbundle: compiling %s: %w", file, err)
			return
		}
		if exec.NumOutputs != len(r.b.Outputs) {
			exec.Destroy()
			c.err = fmt.Errorf("exportbundle: %s returns %d outputs, the manifest lists %d", file, exec.NumOutputs, len(r.b.Outputs))
			return
		}
		c.exec = exec
	})
	return c.exec, c.err
}

func fromDevice(b *pjrt.Buffer) (Tensor, error) {
	dims, err := b.Dimensions()
	if err != nil {
		return Tensor{}, err
	}
	pd, err := b.DType()
	if err != nil {
		return Tensor{}, err
	}
	d := tensorfile.DTypeOf(pd)
	if d == "" || pd == dtypes.InvalidDType {
		return Tensor{}, fmt.Errorf("the program returned dtype %s, which a bundle cannot hold", pd)
	}
	n, err := b.Size()
	if err != nil {
		return Tensor{}, err
	}
	t := Tensor{DType: d, Shape: dims, Data: make([]byte, n)}
	if err := t.check(); err != nil {
		return Tensor{}, err
	}
	if err := b.ToHost(t.Data); err != nil {
		return Tensor{}, err
	}
	return t, nil
}

// Close releases the compiled programs, the device weights and the PJRT client, after the Runs in
// flight return. Run after Close is an error; Close is idempotent.
func (r *Runner) Close() error {
	r.life.Lock()
	defer r.life.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, c := range r.execs {
		if c.exec != nil {
			errs = append(errs, c.exec.Destroy())
		}
	}
	for _, w := range r.weights {
		errs = append(errs, w.Destroy())
	}
	if r.client != nil {
		errs = append(errs, r.client.Destroy())
	}
	return errors.Join(errs...)
}

// RunJSON runs r once on a JSON request read from body and writes the JSON answer to w: the
// request and the answer of POST /predict (see Handler), decoded, checked and encoded by the same
// code, with no HTTP. The body is read as a stream and refused at the first byte that breaks the
// bundle's shapes, and at most MaxRequestBytes of it are read. A refused or failed request is a
// *RequestError whose message is the one /predict answers with; nothing is written to w then.
func RunJSON(r *Runner, body io.Reader, w io.Writer) error {
	if r == nil {
		return errors.New("exportbundle: RunJSON: nil Runner")
	}
	if body == nil {
		return errors.New("exportbundle: RunJSON: nil body")
	}
	out, rerr := runJSON(r, http.MaxBytesReader(nil, io.NopCloser(body), MaxRequestBytes), nil, 0)
	if rerr != nil {
		return rerr
	}
	_, err := w.Write(out)
	return err
}
