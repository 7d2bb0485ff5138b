package exportbundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// The Open Inference Protocol (KServe v2, as Triton, KServe, Seldon MLServer and others speak
// it) over HTTP: health, server and model metadata, readiness and infer, with the binary tensor
// data extension. A bundle is one model named by its manifest; it has one version, "1" (a
// bundle folder holds one program set), so a request for any other version is a 404 rather than
// an answer from a model the client did not ask for.

// ModelVersion is the one version each served bundle answers to.
const ModelVersion = "1"

// inferenceHeaderLength is the binary tensor data extension's header: the length of the JSON
// that starts a body whose binary tensors follow it.
const inferenceHeaderLength = "Inference-Header-Content-Length"

// ServerName is what GET /v2 reports as the server's name.
const ServerName = "nitro"

// protocolDTypes maps a bundle dtype to the protocol's datatype name.
var protocolDTypes = map[tensorfile.DType]string{
	tensorfile.BOOL: "BOOL", tensorfile.U8: "UINT8", tensorfile.U16: "UINT16", tensorfile.U32: "UINT32", tensorfile.U64: "UINT64",
	tensorfile.I8: "INT8", tensorfile.I16: "INT16", tensorfile.I32: "INT32", tensorfile.I64: "INT64",
	tensorfile.F16: "FP16", tensorfile.BF16: "BF16", tensorfile.F32: "FP32", tensorfile.F64: "FP64",
}

// ProtocolDatatype is the Open Inference Protocol's name for d (FP32 for F32, ...), "" for none.
func ProtocolDatatype(d tensorfile.DType) string { return protocolDTypes[d] }

// TensorMetadata is one input or output in a model's metadata: the shape has -1 at the batch axis.
type TensorMetadata struct {
	Name     string `json:"name"`
	Datatype string `json:"datatype"`
	Shape    []int  `json:"shape"`
}

// ModelMetadata is GET /v2/models/{name}'s answer.
type ModelMetadata struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions"`
	Platform string           `json:"platform"`
	Inputs   []TensorMetadata `json:"inputs"`
	Outputs  []TensorMetadata `json:"outputs"`
}

// Metadata is r's model metadata as the protocol reports it; a text generator's is its prompt
// and text (see GeneratorSpec), not its decode step's tensors.
func Metadata(r *Runner) ModelMetadata {
	if r.b.Generator != nil {
		return generatorMetadata(r)
	}
	conv := func(specs []TensorSpec) []TensorMetadata {
		out := make([]TensorMetadata, len(specs))
		for i, s := range specs {
			out[i] = TensorMetadata{Name: s.Name, Datatype: ProtocolDatatype(s.DType), Shape: s.ShapeAt(-1)}
		}
		return out
	}
	return ModelMetadata{Name: r.Name(), Versions: []string{ModelVersion}, Platform: FormatName,
		Inputs: conv(r.Inputs()), Outputs: conv(r.Outputs())}
}

// ModelsHandler answers /predict (one runner only: with several it is a 404 naming them) and the
// Open Inference Protocol's REST API for every runner by its name, under the default bounds of
// ServeConfig, which a model's infer shares with /predict:
//
//	GET  /v2/health/live, /v2/health/ready          200 while serving
//	GET  /v2                                        {"name", "version", "extensions"}
//	GET  /v2/models/{name}[/versions/1]             ModelMetadata
//	GET  /v2/models/{name}[/versions/1]/ready       200
//	POST /v2/models/{name}[/versions/1]/infer       {"id", "parameters", "inputs", "outputs"}
//
// An infer request's inputs are [{"name", "shape", "datatype", "data"}], data flat in row-major
// order or nested to the shape, each input's name before its data; "outputs" picks which
// outputs come back, in its order. With the binary tensor data extension (the header
// Inference-Header-Content-Length: N), the first N bytes are that JSON and each input with
// parameters.binary_data_size has its raw little-endian bytes after it, in the order of
// "inputs"; an output asked for with parameters.binary_data (or every output, with the
// request's parameters.binary_data_output) comes back the same way. A refused request is
// {"error": "..."} naming the field: 400 for a malformed body, a wrong datatype, shape or size;
// 404 for an unknown model or version; 405 for a wrong method; and the bounds' 408, 413 and 503
// as for /predict. Two runners of one name are an error.
func ModelsHandler(rs []*Runner) (http.Handler, error) {
	cfg, _ := ServeConfig{}.withDefaults()
	svc, err := newService(rs, cfg)
	if err != nil {
		return nil, err
	}
	return svc.mux(), nil
}

func (s *service) routeV2(mux *http.ServeMux) {
	get := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeError(w, http.StatusMethodNotAllowed, "use GET")
				return
			}
			h(w, req)
		}
	}
	// The status is the answer; the body says it too, for clients that read one (KServe's).
	mux.HandleFunc("/v2/health/live", get(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, map[string]bool{"live": true}) }))
	mux.HandleFunc("/v2/health/ready", get(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, map[string]bool{"ready": true}) }))
	mux.HandleFunc("/v2", get(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"name": ServerName, "version": strconv.Itoa(FormatVersion), "extensions": []string{"binary_tensor_data"}})
	}))
	mux.HandleFunc("/v2/models/", s.model)
}

// model routes /v2/models/{name}[/versions/{v}][/ready|/infer].
func (s *service) model(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/v2/models/"), "/")
	name, rest := parts[0], parts[1:]
	if len(rest) >= 2 && rest[0] == "versions" {
		if rest[1] != ModelVersion {
			writeError(w, http.StatusNotFound, fmt.Sprintf("model %q has no version %q: it serves version %s only", name, rest[1], ModelVersion))
			return
		}
		rest = rest[2:]
	}
	r, found := s.models[name]
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown model %q: this server serves %s", name, strings.Join(s.names, ", ")))
		return
	}
	verb := strings.Join(rest, "/")
	method := http.MethodGet
	if verb == "infer" {
		method = http.MethodPost
	}
	if req.Method != method && !(method == http.MethodGet && req.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "use "+method)
		return
	}
	switch verb {
	case "":
		writeJSON(w, Metadata(r))
	case "ready":
		writeJSON(w, map[string]any{"name": name, "ready": true})
	case "infer":
		if ce := req.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
			// Compressed bytes read as JSON would be refused as malformed, or worse: say why.
			writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q: this server reads uncompressed bodies only (send the request without compression)", ce))
			return
		}
		s.bounded(w, req, name, "v2", func(body io.Reader, read func() *RequestError) (answer, *RequestError) {
			if r.b.Generator != nil {
				return generateInfer(req.Context(), r, body, req.Header.Get(inferenceHeaderLength), read, s.cfg.BodyTimeout)
			}
			return infer(r, body, req.Header.Get(inferenceHeaderLength), req.ContentLength, read, s.cfg.BodyTimeout)
		})
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %q under model %q (metadata, ready, infer)", verb, name))
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// infer is one /infer request: decode (JSON, or JSON then binary tensors when headerLen is
// set), run, encode.
func infer(r *Runner, body io.Reader, headerLen string, contentLength int64, read func() *RequestError, stall time.Duration) (out answer, rerr *RequestError) {
	defer func() {
		if p := recover(); p != nil {
			out, rerr = answer{}, &RequestError{Status: http.StatusInternalServerError, Msg: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	req, err := decodeInfer(body, r, headerLen, contentLength)
	if err != nil {
		return answer{}, decodeFailure(err, stall)
	}
	if read != nil {
		if rerr := read(); rerr != nil {
			return answer{}, rerr
		}
	}
	res, err := r.Run(req.batch, req.tensors)
	if err != nil {
		status := http.StatusInternalServerError
		if errorsAsInput(err) {
			status = http.StatusBadRequest
		}
		return answer{}, &RequestError{Status: status, Msg: err.Error(), Err: err}
	}
	return encodeInfer(r, req, res), nil
}

// encodeInfer writes the answer: the outputs asked for (all, in the bundle's order, when none
// were), each as flat JSON data or, asked for binary, as raw bytes after the JSON.
func encodeInfer(r *Runner, req *inferRequest, res map[string]Tensor) answer {
	var b bytes.Buffer
	openAnswer(&b, r.Name(), req.id, req.hasID)
	var raw [][]byte
	for i, o := range req.outputs {
		if i > 0 {
			b.WriteByte(',')
		}
		t := res[o.name]
		b.WriteString(`{"name":`)
		writeJSONString(&b, o.name)
		b.WriteString(`,"datatype":"` + ProtocolDatatype(t.DType) + `","shape":`)
		shape, _ := json.Marshal(t.Shape)
		b.Write(shape)
		if o.binary {
			fmt.Fprintf(&b, `,"parameters":{"binary_data_size":%d}}`, len(t.Data))
			raw = append(raw, t.Data)
			continue
		}
		b.WriteString(`,"data":`)
		n := len(t.Data) / max(t.DType.Size(), 1)
		encodeNested(&b, t, []int{n}, 0)
		b.WriteByte('}')
	}
	return closeAnswer(&b, raw)
}

// closeAnswer ends an infer answer's outputs array and JSON and appends the binary outputs
// after it, the JSON's length being the header that says where they start.
func closeAnswer(b *bytes.Buffer, raw [][]byte) answer {
	b.WriteString("]}")
	if raw == nil {
		b.WriteByte('\n')
		return answer{body: b.Bytes(), contentType: "application/json"}
	}
	headerLen := b.Len()
	for _, d := range raw {
		b.Write(d)
	}
	return answer{body: b.Bytes(), contentType: "application/octet-stream", headerLen: headerLen}
}

// openAnswer starts an infer answer up to its outputs array: the model, its version, the id.
func openAnswer(b *bytes.Buffer, model, id string, hasID bool) {
	b.WriteString(`{"model_name":`)
	writeJSONString(b, model)
	b.WriteString(`,"model_version":"` + ModelVersion + `"`)
	if hasID {
		b.WriteString(`,"id":`)
		writeJSONString(b, id)
	}
	b.WriteString(`,"outputs":[`)
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}
