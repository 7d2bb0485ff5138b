package exportbundle

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gopjrt/pjrt"
	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/tensorfile"
)

// A text generator's bundle holds its decode step rather than Forward: one program at batch size
// 1 that takes one token, its position and the state the earlier steps left (a transformer's
// key/value caches), and returns the next token's logits and the state for the next step. The
// state is an input and an output of the same name, so the program stays a pure function: the
// runner keeps it on the device between steps and the host loop (generate.Generate) never sees
// it. A token is a byte: the vocabulary is 256, so a prompt is its bytes and the text the bytes
// drawn.

// GeneratorVocab is the vocabulary a served generator has: a token is a byte.
const GeneratorVocab = 256

// maxGeneratorContext bounds generator.context: a prompt is at most this many bytes.
const maxGeneratorContext = 1 << 20

// GeneratorSpec is the manifest's "generator" entry: the program is a decode step.
type GeneratorSpec struct {
	// Context is how many positions the step attends over: the longest prompt, and the window
	// generate.Generate re-feeds when it is full.
	Context int `json:"context"`
	// Vocab is the number of logits a step returns: GeneratorVocab.
	Vocab int `json:"vocab"`
	// Token names the input that takes the token: I32 [-1, 1].
	Token string `json:"token"`
	// Position names the input that takes the token's position, 0..Context-1: I32 [-1].
	Position string `json:"position"`
	// Logits names the output with the next token's logits: F32 [-1, Vocab].
	Logits string `json:"logits"`
	// State names the tensors carried from one step to the next: each is an input and an
	// output of that name, of one dtype and shape, zero at a window's start.
	State []string `json:"state"`
}

func (g *GeneratorSpec) clone() *GeneratorSpec {
	if g == nil {
		return nil
	}
	c := *g
	c.State = slices.Clone(g.State)
	return &c
}

// check validates the entry against the program's inputs, outputs and batch sizes: every input
// and output has its part in a step, so a served generator can fill and read them all.
func (g *GeneratorSpec) check(inputs, outputs []TensorSpec, batches []int) error {
	find := func(specs []TensorSpec, name string) (TensorSpec, bool) {
		i := slices.IndexFunc(specs, func(s TensorSpec) bool { return s.Name == name })
		if i < 0 {
			return TensorSpec{}, false
		}
		return specs[i], true
	}
	want := func(field, list string, specs []TensorSpec, name string, dt tensorfile.DType, shape []int) error {
		if name == "" {
			return fmt.Errorf("%s: empty: name the %s that plays this part", field, list[:len(list)-1])
		}
		s, ok := find(specs, name)
		if !ok {
			return fmt.Errorf("%s: %q is not one of the %s (%s)", field, name, list, specNames(specs))
		}
		if s.DType != dt || !slices.Equal(s.Shape, shape) || s.BatchAxis != 0 {
			return fmt.Errorf("%s: %q is %s%v, a generator's takes %s%v (batch axis 0)", field, name, s.DType, s.Shape, dt, shape)
		}
		return nil
	}
	switch {
	case g.Context < 1 || g.Context > maxGeneratorContext:
		return fmt.Errorf("generator.context: %d, want 1..%d positions", g.Context, maxGeneratorContext)
	case g.Vocab != GeneratorVocab:
		return fmt.Errorf("generator.vocab: %d, want %d (a token is a byte)", g.Vocab, GeneratorVocab)
	case !slices.Equal(batches, []int{1}):
		return fmt.Errorf("generator: batch_sizes %v, a decode step has one program, at batch size 1", batches)
	}
	if err := want("generator.token", "inputs", inputs, g.Token, tensorfile.I32, []int{-1, 1}); err != nil {
		return err
	}
	if err := want("generator.position", "inputs", inputs, g.Position, tensorfile.I32, []int{-1}); err != nil {
		return err
	}
	if g.Position == g.Token {
		return fmt.Errorf("generator.position: %q is the token's input too", g.Position)
	}
	if err := want("generator.logits", "outputs", outputs, g.Logits, tensorfile.F32, []int{-1, g.Vocab}); err != nil {
		return err
	}
	roles := map[string]bool{g.Token: true, g.Position: true}
	outRoles := map[string]bool{g.Logits: true}
	for i, name := range g.State {
		field := fmt.Sprintf("generator.state[%d]", i)
		in, ok := find(inputs, name)
		if !ok {
			return fmt.Errorf("%s: %q is not one of the inputs (%s)", field, name, specNames(inputs))
		}
		if roles[name] {
			return fmt.Errorf("%s: input %q has another part already", field, name)
		}
		out, ok := find(outputs, name)
		if !ok {
			return fmt.Errorf("%s: %q is not one of the outputs (%s): the step must return the state it is given", field, name, specNames(outputs))
		}
		if outRoles[name] {
			return fmt.Errorf("%s: output %q has another part already", field, name)
		}
		if in.DType != out.DType || !slices.Equal(in.Shape, out.Shape) || in.BatchAxis != 0 || out.BatchAxis != 0 {
			return fmt.Errorf("%s: %q goes in as %s%v and comes out as %s%v: the state must keep its dtype and shape", field, name, in.DType, in.Shape, out.DType, out.Shape)
		}
		roles[name], outRoles[name] = true, true
	}
	for _, s := range inputs {
		if !roles[s.Name] {
			return fmt.Errorf("generator: input %q has no part in a step (token, position or state): a server could not fill it", s.Name)
		}
	}
	for _, s := range outputs {
		if !outRoles[s.Name] {
			return fmt.Errorf("generator: output %q has no part in a step (logits or state)", s.Name)
		}
	}
	return nil
}

// Generator returns the bundle's generator entry, nil when its program is not a decode step.
func (r *Runner) Generator() *GeneratorSpec { return r.b.Generator.clone() }

// Stepper returns a generate.Stepper over the bundle's decode step, for generate.Generate: each
// Step uploads the token and its position (8 bytes) and reads back the logits (Vocab floats);
// the state stays on the device between steps. A Stepper belongs to one goroutine; several may
// run on one Runner at once, each with its own state. Close it to free its state.
func (r *Runner) Stepper() (*Stepper, error) {
	if r.b.Generator == nil {
		return nil, fmt.Errorf("exportbundle: bundle %q is not a text generator (its manifest has no generator entry): export a model with a decode step (nitro export gpt)", r.Name())
	}
	return &Stepper{r: r, g: r.b.Generator.clone()}, nil
}

// Stepper runs a generator bundle's decode step one token at a time (see Runner.Stepper).
type Stepper struct {
	r     *Runner
	g     *GeneratorSpec
	state map[string]*pjrt.Buffer // nil after Reset: zeros are uploaded at the first Step
	next  int
}

var _ generate.Stepper = (*Stepper)(nil)

// Context is the positions the step attends over.
func (s *Stepper) Context() int { return s.g.Context }

// Reset starts a window: the next Step is at position 0, over zero state.
func (s *Stepper) Reset() error {
	s.free()
	s.next = 0
	return nil
}

// Close frees the state on the device. The Stepper may be Reset and used again.
func (s *Stepper) Close() error {
	s.free()
	return nil
}

func (s *Stepper) free() {
	for _, b := range s.state {
		b.Destroy()
	}
	s.state = nil
}

// Step feeds token at pos, which must be the position after the last Step's (0 after Reset),
// and returns the next token's logits.
func (s *Stepper) Step(token, pos int) ([]float32, error) {
	if token < 0 || token >= s.g.Vocab {
		return nil, fmt.Errorf("exportbundle: token %d: want 0..%d (a byte)", token, s.g.Vocab-1)
	}
	if pos != s.next || pos >= s.g.Context {
		return nil, fmt.Errorf("exportbundle: Step at position %d: want %d, below the context %d (Reset starts again at 0)", pos, s.next, s.g.Context)
	}
	r := s.r
	r.life.RLock()
	defer r.life.RUnlock()
	if r.closed {
		return nil, errors.New("exportbundle: Step on a closed Runner")
	}
	exec, err := r.executable(1)
	if err != nil {
		return nil, err
	}
	args, uploaded, err := s.args(token, pos)
	defer func() { // this step's uploads: the program has read them once it returns
		for _, b := range uploaded {
			b.Destroy()
		}
	}()
	if err != nil {
		return nil, err
	}
	outs, err := exec.Execute(args...).DonateNone().Done()
	if err != nil {
		return nil, fmt.Errorf("exportbundle: the decode step at position %d: %w", pos, err)
	}
	logits, next, err := s.outputs(outs)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: the decode step at position %d: %w", pos, err)
	}
	s.free() // the previous state: the step has read it
	s.state = next
	s.next++
	return logits, nil
}

// args are the program's arguments in manifest order: the token and position uploaded, the
// state as the last step left it (zeros uploaded after a Reset), then the weights. uploaded
// lists the buffers made here, for the caller to free.
func (s *Stepper) args(token, pos int) (args, uploaded []*pjrt.Buffer, err error) {
	r := s.r
	args = make([]*pjrt.Buffer, 0, len(r.b.Inputs)+len(r.weights))
	for _, spec := range r.b.Inputs {
		var t Tensor
		switch spec.Name {
		case s.g.Token:
			t, _ = NewTensor([]int{1, 1}, []int32{int32(token)})
		case s.g.Position:
			t, _ = NewTensor([]int{1}, []int32{int32(pos)})
		default:
			if b := s.state[spec.Name]; b != nil {
				args = append(args, b)
				continue
			}
			t = Tensor{DType: spec.DType, Shape: spec.ShapeAt(1)}
			n, _ := numElements(t.Shape)
			t.Data = make([]byte, n*int64(spec.DType.Size()))
		}
		buf, err := toDevice(r.client, t)
		if err != nil {
			return nil, uploaded, fmt.Errorf("exportbundle: input %q to the device: %w", spec.Name, err)
		}
		uploaded = append(uploaded, buf)
		args = append(args, buf)
	}
	return append(args, r.weights...), uploaded, nil
}

// outputs reads the logits back and keeps the state's buffers on the device; every other buffer
// of outs is freed, and all of them on an error.
func (s *Stepper) outputs(outs []*pjrt.Buffer) (logits []float32, next map[string]*pjrt.Buffer, err error) {
	specs := s.r.b.Outputs
	next = make(map[string]*pjrt.Buffer, len(s.g.State))
	var lt Tensor
	for i, b := range outs {
		switch {
		case i < len(specs) && specs[i].Name == s.g.Logits:
			lt, err = fromDevice(b)
			b.Destroy()
		case i < len(specs) && slices.Contains(s.g.State, specs[i].Name):
			next[specs[i].Name] = b
		default:
			b.Destroy()
		}
	}
	if err == nil && len(outs) != len(specs) {
		err = fmt.Errorf("the program returned %d outputs, the manifest lists %d", len(outs), len(specs))
	}
	if err == nil && (lt.DType != tensorfile.F32 || !slices.Equal(lt.Shape, []int{1, s.g.Vocab})) {
		err = fmt.Errorf("output %q: the program returned %s%v, want F32[1 %d]", s.g.Logits, lt.DType, lt.Shape, s.g.Vocab)
	}
	if err == nil {
		logits, err = Values[float32](lt)
	}
	if err != nil {
		for _, b := range next {
			b.Destroy()
		}
		return nil, nil, err
	}
	return logits, next, nil
}
