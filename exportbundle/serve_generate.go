package exportbundle

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/tensorfile"
)

// A generator bundle is served on the Open Inference Protocol as a model that continues a
// prompt: one input, "prompt" (BYTES [1]: the text, or UINT8 [n]: its bytes), the sampling
// options as the request's parameters, and two outputs, "text" (BYTES [1]) and "tokens"
// (UINT8 [n]), the bytes drawn. The loop runs on the server (generate.Generate over the
// runner's Stepper), so a client makes one request for a whole continuation. The body is small
// (a prompt is at most the context), so it is read whole under a bound and then parsed.

// The generator's protocol names.
const (
	GeneratePrompt = "prompt"
	GenerateText   = "text"
	GenerateTokens = "tokens"
)

// MaxGenerateTokens bounds parameters.max_tokens: one request holds a run slot while it
// generates, so its length must be bounded.
const MaxGenerateTokens = 4096

// DefaultGenerateOptions are the options a request that sets no parameter gets: nitro sample's
// flag defaults, so one seed gives one text on either.
var DefaultGenerateOptions = generate.Options{Tokens: 200, Temperature: 1, TopK: 0, Seed: 1}

// generatorMetadata is a generator's model metadata: the prompt and the text, not the step's
// tensors, which the server fills and reads itself.
func generatorMetadata(r *Runner) ModelMetadata {
	return ModelMetadata{Name: r.Name(), Versions: []string{ModelVersion}, Platform: FormatName,
		Inputs: []TensorMetadata{{Name: GeneratePrompt, Datatype: "BYTES", Shape: []int{1}}},
		Outputs: []TensorMetadata{{Name: GenerateText, Datatype: "BYTES", Shape: []int{1}},
			{Name: GenerateTokens, Datatype: "UINT8", Shape: []int{-1}}}}
}

// generateRequest is a decoded generate request.
type generateRequest struct {
	id      string
	hasID   bool
	prompt  []int
	opts    generate.Options
	outputs []requestedOutput
}

// maxGenerateBody is the body a generator reads: a prompt of context bytes, in JSON as numbers
// of up to four characters each, plus room for the rest of the request.
func maxGenerateBody(context int) int64 { return 64<<10 + 8*int64(context) }

// generateInfer answers one infer request to a generator: read, decode, generate, encode.
func generateInfer(ctx context.Context, r *Runner, body io.Reader, headerLen string, read func() *RequestError, stall time.Duration) (out answer, rerr *RequestError) {
	defer func() {
		if p := recover(); p != nil {
			out, rerr = answer{}, &RequestError{Status: http.StatusInternalServerError, Msg: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	g := r.b.Generator
	limit := maxGenerateBody(g.Context)
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return answer{}, decodeFailure(err, stall)
	}
	if int64(len(data)) > limit {
		return answer{}, &RequestError{Status: http.StatusRequestEntityTooLarge,
			Msg: fmt.Sprintf("request body over %d bytes: model %q takes a prompt of at most %d bytes", limit, r.Name(), g.Context)}
	}
	req, err := decodeGenerate(data, headerLen, r.Name(), g.Context)
	if err != nil {
		return answer{}, decodeFailure(err, stall)
	}
	if read != nil {
		if rerr := read(); rerr != nil {
			return answer{}, rerr
		}
	}
	s, err := r.Stepper()
	if err != nil {
		return answer{}, &RequestError{Status: http.StatusInternalServerError, Msg: err.Error(), Err: err}
	}
	defer s.Close()
	tokens, err := generate.Generate(untilDone{s, ctx}, req.prompt, req.opts)
	if ctx.Err() != nil {
		// Nobody is left to read the answer: the run slot goes back now, not after max_tokens.
		return answer{}, &RequestError{Status: http.StatusServiceUnavailable, Msg: "the request was cancelled (the client went away) while generating", Err: ctx.Err()}
	}
	if err != nil {
		return answer{}, &RequestError{Status: http.StatusInternalServerError, Msg: err.Error(), Err: err}
	}
	return encodeGenerate(r.Name(), req, tokens), nil
}

// untilDone is a Stepper that stops stepping once ctx is done (its request's client gone).
type untilDone struct {
	*Stepper
	ctx context.Context
}

func (u untilDone) Step(token, pos int) ([]float32, error) {
	if err := u.ctx.Err(); err != nil {
		return nil, err
	}
	return u.Stepper.Step(token, pos)
}

// generateBody is an infer request to a generator as JSON. Its fields are the protocol's; an
// unknown one is refused rather than read past, since a misspelt one would be lost silently.
type generateBody struct {
	ID           *string                    `json:"id"`
	ModelName    *string                    `json:"model_name"`
	ModelVersion *string                    `json:"model_version"`
	Parameters   map[string]json.RawMessage `json:"parameters"`
	Inputs       []generateInput            `json:"inputs"`
	Outputs      []generateOutput           `json:"outputs"`
}

type generateInput struct {
	Name       string                     `json:"name"`
	Shape      []int64                    `json:"shape"`
	Datatype   string                     `json:"datatype"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Data       json.RawMessage            `json:"data"`
}

type generateOutput struct {
	Name       string                     `json:"name"`
	Parameters map[string]json.RawMessage `json:"parameters"`
}

// decodeGenerate parses a whole infer body for a generator of the given context. A refusal is a
// *fieldError naming the field, or a *syntaxError.
func decodeGenerate(data []byte, headerLen, model string, context int) (*generateRequest, error) {
	jsonPart, rest := data, []byte(nil)
	if headerLen != "" {
		n, err := strconv.ParseInt(headerLen, 10, 64)
		if err != nil || n < 1 || n > int64(len(data)) {
			return nil, &fieldError{inferenceHeaderLength, fmt.Sprintf("%q is not a length from 1 to the body's %d bytes", headerLen, len(data))}
		}
		jsonPart, rest = data[:n], data[n:]
	}
	body, err := parseGenerateBody(jsonPart, model)
	if err != nil {
		return nil, err
	}
	req := &generateRequest{opts: DefaultGenerateOptions}
	if body.ID != nil {
		req.id, req.hasID = *body.ID, true
	}
	binaryOut, err := generateParameters(body.Parameters, &req.opts)
	if err != nil {
		return nil, err
	}
	if len(body.Inputs) != 1 {
		return nil, &fieldError{"inputs", fmt.Sprintf("%d inputs: a text generator takes one, %q (BYTES [1], the text, or UINT8 [n], its bytes)", len(body.Inputs), GeneratePrompt)}
	}
	if req.prompt, err = promptTokens(body.Inputs[0], &rest, headerLen != "", context); err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, &fieldError{inferenceHeaderLength, fmt.Sprintf("the body holds %d bytes past the JSON header and the prompt's binary_data_size: the header or the size is wrong", len(rest))}
	}
	req.outputs, err = generateOutputs(body.Outputs, binaryOut)
	return req, err
}

// parseGenerateBody decodes the JSON (a key twice, an unknown field or trailing data refused)
// and checks the model and version it may repeat from the path.
func parseGenerateBody(jsonPart []byte, model string) (*generateBody, error) {
	if err := tensorfile.CheckUniqueKeys(jsonPart); err != nil {
		return nil, &syntaxError{msg: err.Error()}
	}
	var body generateBody
	dec := json.NewDecoder(bytes.NewReader(jsonPart))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, &syntaxError{msg: err.Error() + " (an infer request holds id, model_name, model_version, parameters, inputs, outputs)"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &syntaxError{msg: "data after the JSON object"}
	}
	if body.ModelName != nil && *body.ModelName != model {
		return nil, &fieldError{"model_name", fmt.Sprintf("%q, but the request is for %q", *body.ModelName, model)}
	}
	if body.ModelVersion != nil && *body.ModelVersion != ModelVersion {
		return nil, &fieldError{"model_version", fmt.Sprintf("%q, this model serves version %s only", *body.ModelVersion, ModelVersion)}
	}
	return &body, nil
}

// promptTokens is the prompt input's bytes as tokens, 1 to context of them.
func promptTokens(in generateInput, rest *[]byte, binaryBody bool, context int) ([]int, error) {
	if in.Name != GeneratePrompt {
		return nil, &fieldError{"inputs[0].name", fmt.Sprintf("%q is not an input of this model (it takes %s)", in.Name, GeneratePrompt)}
	}
	prompt, err := decodePrompt(in, rest, binaryBody)
	if err != nil {
		return nil, err
	}
	switch {
	case len(prompt) == 0:
		return nil, &fieldError{"inputs[0].data", "the prompt is empty: give at least one byte for the model to continue"}
	case len(prompt) > context:
		return nil, &fieldError{"inputs[0].data", fmt.Sprintf("the prompt is %d bytes, more than the model's context of %d: send at most its last %d bytes", len(prompt), context, context)}
	}
	tokens := make([]int, len(prompt))
	for i, b := range prompt {
		tokens[i] = int(b)
	}
	return tokens, nil
}

// generateOutputs are the outputs asked for (both, when none are), each binary when it or the
// request's binary_data_output says so.
func generateOutputs(outs []generateOutput, binaryOut bool) ([]requestedOutput, error) {
	if outs == nil {
		return []requestedOutput{{GenerateText, binaryOut}, {GenerateTokens, binaryOut}}, nil
	}
	var req []requestedOutput
	for i, o := range outs {
		field := fmt.Sprintf("outputs[%d]", i)
		if o.Name != GenerateText && o.Name != GenerateTokens {
			return nil, &fieldError{field + ".name", fmt.Sprintf("%q is not an output of this model (it has %s, %s)", o.Name, GenerateText, GenerateTokens)}
		}
		if slices.ContainsFunc(req, func(p requestedOutput) bool { return p.name == o.Name }) {
			return nil, &fieldError{field + ".name", fmt.Sprintf("output %q is asked for twice", o.Name)}
		}
		binary := binaryOut
		for k, v := range o.Parameters {
			if k != "binary_data" {
				return nil, &fieldError{field + ".parameters." + k, "not a parameter of an output (binary_data is)"}
			}
			if err := json.Unmarshal(v, &binary); err != nil {
				return nil, &fieldError{field + ".parameters.binary_data", "not true or false"}
			}
		}
		req = append(req, requestedOutput{o.Name, binary || binaryOut})
	}
	return req, nil
}

// generateParameters reads the request's parameters into o, each checked by its name, and
// returns binary_data_output.
func generateParameters(params map[string]json.RawMessage, o *generate.Options) (binaryOut bool, err error) {
	keys := slices.Sorted(maps.Keys(params)) // the first bad one named is always the same
	whole := func(k string, raw json.RawMessage, lo, hi int64) (int64, error) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, &fieldError{"parameters." + k, fmt.Sprintf("%s: want a whole number from %d to %d", raw, lo, hi)}
		}
		return n, nil
	}
	tokensFrom := ""
	for _, k := range keys {
		raw := params[k]
		switch k {
		case "max_tokens", "tokens":
			if tokensFrom != "" {
				return false, &fieldError{"parameters." + k, fmt.Sprintf("given with %s: they are one parameter, send one", tokensFrom)}
			}
			tokensFrom = k
			n, err := whole(k, raw, 1, MaxGenerateTokens)
			if err != nil {
				return false, err
			}
			o.Tokens = int(n)
		case "temperature":
			var t float64
			if err := json.Unmarshal(raw, &t); err != nil {
				return false, &fieldError{"parameters.temperature", fmt.Sprintf("%s is not a number", raw)}
			}
			o.Temperature = t
		case "top_k":
			n, err := whole(k, raw, 0, generate.MaxTopK)
			if err != nil {
				return false, err
			}
			o.TopK = int(n)
		case "seed":
			n, err := strconv.ParseUint(string(raw), 10, 64)
			if err != nil {
				return false, &fieldError{"parameters.seed", fmt.Sprintf("%s: want a whole number from 0 to %d", raw, uint64(math.MaxUint64))}
			}
			o.Seed = n
		case "binary_data_output":
			if err := json.Unmarshal(raw, &binaryOut); err != nil {
				return false, &fieldError{"parameters.binary_data_output", "not true or false"}
			}
		default:
			return false, &fieldError{"parameters." + k, "not a parameter of a text generator (it takes max_tokens, temperature, top_k, seed, binary_data_output)"}
		}
	}
	if err := o.Check(); err != nil {
		// The options' own reasons, with the request's parameter names for the flags'.
		return false, &fieldError{"parameters", parameterNames.Replace(err.Error())}
	}
	return binaryOut, nil
}

var parameterNames = strings.NewReplacer("Tokens (--tokens)", "max_tokens", "Temperature (--temperature)", "temperature",
	"TopK (--top-k)", "top_k", "TopK 1 (--top-k 1)", "top_k 1", "\n", "; ")

// decodePrompt reads the prompt's bytes: BYTES [1] (one string; in binary, a 4-byte
// little-endian length and the bytes) or UINT8 [n], as JSON data or binary after the header.
func decodePrompt(in generateInput, rest *[]byte, binaryBody bool) ([]byte, error) {
	elems, err := promptElements(in.Shape)
	if err != nil {
		return nil, err
	}
	raw, err := promptBinary(in, rest, binaryBody)
	if err != nil {
		return nil, err
	}
	switch in.Datatype {
	case "BYTES":
		return bytesPrompt(in, elems, raw)
	case "UINT8":
		return uint8Prompt(in, elems, raw)
	}
	return nil, &fieldError{"inputs[0].datatype", fmt.Sprintf("%q: the prompt is BYTES (the text) or UINT8 (its bytes)", in.Datatype)}
}

// promptElements is the number of elements a prompt's shape holds: no prompt holds more than
// the longest context, which also keeps the product from overflowing.
func promptElements(shape []int64) (int64, error) {
	if shape == nil {
		return 0, &fieldError{"inputs[0].shape", "missing"}
	}
	elems := int64(1)
	for _, d := range shape {
		if d < 0 || d > maxGeneratorContext || elems*d > maxGeneratorContext {
			return 0, &fieldError{"inputs[0].shape", fmt.Sprintf("%v is not the shape of a prompt (at most %d elements)", shape, maxGeneratorContext)}
		}
		elems *= d
	}
	return elems, nil
}

// promptBinary takes the prompt's binary bytes off rest, when its parameters say it has some
// (nil when its data is JSON).
func promptBinary(in generateInput, rest *[]byte, binaryBody bool) ([]byte, error) {
	size := int64(-1)
	for k, v := range in.Parameters {
		if k != "binary_data_size" {
			return nil, &fieldError{"inputs[0].parameters." + k, "not a parameter of an input (binary_data_size is)"}
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			return nil, &fieldError{"inputs[0].parameters.binary_data_size", fmt.Sprintf("%s is not a byte count", v)}
		}
		size = n
	}
	switch {
	case size >= 0 && in.Data != nil:
		return nil, &fieldError{"inputs[0]", `both "data" and parameters.binary_data_size: send one`}
	case size < 0 && in.Data == nil:
		return nil, &fieldError{"inputs[0].data", "missing (and no parameters.binary_data_size)"}
	case size < 0:
		return nil, nil
	case !binaryBody:
		return nil, &fieldError{"inputs[0].parameters.binary_data_size", "binary data needs the " + inferenceHeaderLength + " header"}
	case size > int64(len(*rest)):
		return nil, &fieldError{"inputs[0].parameters.binary_data_size", fmt.Sprintf("%d bytes, but the body holds %d after the JSON header", size, len(*rest))}
	}
	raw := (*rest)[:size]
	*rest = (*rest)[size:]
	return raw, nil
}

// bytesPrompt is a BYTES prompt: one string, as JSON or as one binary element.
func bytesPrompt(in generateInput, elems int64, raw []byte) ([]byte, error) {
	if elems != 1 {
		return nil, &fieldError{"inputs[0].shape", fmt.Sprintf("%v: a BYTES prompt is one string, shape [1]", in.Shape)}
	}
	if raw != nil {
		if len(raw) < 4 || int64(binary.LittleEndian.Uint32(raw)) != int64(len(raw)-4) {
			return nil, &fieldError{"inputs[0].parameters.binary_data_size", "a BYTES element is a 4-byte little-endian length and that many bytes, and the size must hold exactly one"}
		}
		return raw[4:], nil
	}
	var s []string
	if err := json.Unmarshal(in.Data, &s); err != nil || len(s) != 1 {
		return nil, &fieldError{"inputs[0].data", `want one string, ["..."]`}
	}
	return []byte(s[0]), nil
}

// uint8Prompt is a UINT8 prompt: its bytes, flat or nested in one row, or binary.
func uint8Prompt(in generateInput, elems int64, raw []byte) ([]byte, error) {
	if len(in.Shape) != 1 && !(len(in.Shape) == 2 && in.Shape[0] == 1) {
		return nil, &fieldError{"inputs[0].shape", fmt.Sprintf("%v: a UINT8 prompt is its bytes, shape [n] (or [1, n])", in.Shape)}
	}
	if raw != nil {
		if int64(len(raw)) != elems {
			return nil, &fieldError{"inputs[0].parameters.binary_data_size", fmt.Sprintf("%d bytes, shape %v of UINT8 is %d", len(raw), in.Shape, elems)}
		}
		return raw, nil
	}
	var flat []json.Number
	var nested [][]json.Number
	dec := json.NewDecoder(bytes.NewReader(in.Data))
	dec.UseNumber()
	if err := dec.Decode(&flat); err != nil {
		if err := json.Unmarshal(in.Data, &nested); err != nil || len(nested) != 1 {
			return nil, &fieldError{"inputs[0].data", "want an array of bytes, 0..255"}
		}
		flat = nested[0]
	}
	if int64(len(flat)) != elems {
		return nil, &fieldError{"inputs[0].data", fmt.Sprintf("%d elements, shape %v holds %d", len(flat), in.Shape, elems)}
	}
	out := make([]byte, len(flat))
	for i, n := range flat {
		v, err := strconv.ParseUint(string(n), 10, 8)
		if err != nil {
			return nil, &fieldError{"inputs[0].data", fmt.Sprintf("element %d is %s: a byte is a whole number 0..255", i, n)}
		}
		out[i] = byte(v)
	}
	return out, nil
}

// encodeGenerate writes the answer: "text" BYTES [1] and "tokens" UINT8 [n], as asked. Text as
// JSON is a string, so bytes that are not UTF-8 are replaced there (U+FFFD); binary output, or
// "tokens", carries the bytes exactly.
func encodeGenerate(model string, req *generateRequest, tokens []int) answer {
	text := make([]byte, len(tokens))
	for i, t := range tokens {
		text[i] = byte(t)
	}
	var b bytes.Buffer
	openAnswer(&b, model, req.id, req.hasID)
	var raw [][]byte
	for i, o := range req.outputs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		writeJSONString(&b, o.name)
		switch {
		case o.name == GenerateText && o.binary:
			elem := binary.LittleEndian.AppendUint32(nil, uint32(len(text)))
			raw = append(raw, append(elem, text...))
			fmt.Fprintf(&b, `,"datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":%d}}`, len(text)+4)
		case o.name == GenerateText:
			b.WriteString(`,"datatype":"BYTES","shape":[1],"data":[`)
			writeJSONString(&b, strings.ToValidUTF8(string(text), string(utf8.RuneError)))
			b.WriteString("]}")
		case o.binary:
			raw = append(raw, text)
			fmt.Fprintf(&b, `,"datatype":"UINT8","shape":[%d],"parameters":{"binary_data_size":%d}}`, len(text), len(text))
		default:
			fmt.Fprintf(&b, `,"datatype":"UINT8","shape":[%d],"data":`, len(text))
			nums, _ := json.Marshal(tokens)
			b.Write(nums)
			b.WriteByte('}')
		}
	}
	return closeAnswer(&b, raw)
}

// errNotPredict is /predict's answer for a generator: its requests are the protocol's.
var errNotPredict = errors.New("is a text generator: POST /v2/models/{name}/infer with a prompt")
