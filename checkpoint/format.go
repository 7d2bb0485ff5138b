package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/tensorfile"
)

// A record is a safetensors file (tensorfile's codec) whose metadata holds these keys.
const (
	metaKey = tensorfile.MetadataKey
	keyCRC  = tensorfile.CRCKey // CRC-32C (Castagnoli) of the data section, 8 hex digits

	keyFormat = "nitro.format"        // strconv.Itoa(recordFormat)
	keyRecord = "nitro.record"        // JSON of recordMeta
	keyDigest = "nitro.header_sha256" // SHA-256 of the header itself, 64 hex digits (see below)
)

// The header digest covers every byte before the data (the length prefix, the record, the
// metadata, the tensor table, the padding) except its own 64 hex digits, so that a header read
// alone (Info) is verified too: the data CRC cannot vouch for the epoch or the step. The writer
// puts it first, at a fixed offset, so a reader finds it without trusting the JSON it guards.
const (
	digestPrefix = `{"` + metaKey + `":{"` + keyDigest + `":"`
	digestLen    = 2 * sha256.Size
)

// FormatError is a file that is not a valid checkpoint: File names it, Field the part at fault.
type FormatError struct {
	File  string
	Field string
	Msg   string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("checkpoint: %s: %s: %s", e.File, e.Field, e.Msg)
}

func formatErr(file, field, format string, args ...any) error {
	return &FormatError{File: file, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// encodeHeader validates r and returns the padded header bytes: the tensors, then the record's
// metadata (the data checksum, the format version, the record as JSON).
func encodeHeader(r *Record) ([]byte, error) {
	// A negative epoch or step would resume before the run began; Save and the manifest refuse
	// one too, so a record written by Write alone cannot carry it either.
	if r.Epoch < 0 || r.Step < 0 {
		return nil, fmt.Errorf("checkpoint: record epoch %d, step %d: negative; both count from 0", r.Epoch, r.Step)
	}
	if r.Accum < 0 || r.Accum > MaxStep {
		return nil, fmt.Errorf("checkpoint: record accum %d: %s", r.Accum, boundMsg(r.Accum, MaxStep))
	}
	meta, err := json.Marshal(metaOf(r))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: record metadata: %w", err)
	}
	if f, msg := outOfBounds(r.Epoch, r.Step, r.Position); f != "" {
		return nil, fmt.Errorf("checkpoint: record %s: %s", f, msg)
	}
	return encodeSignedHeader(r.Tensors, []tensorfile.Meta{{Key: keyFormat, Value: strconv.Itoa(recordFormat)}, {Key: keyRecord, Value: string(meta)}})
}

// headerDigest is the SHA-256 of the length prefix and hdr without hdr's digest digits.
func headerDigest(hdr []byte) string {
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))))
	h.Write(hdr[:len(digestPrefix)])
	h.Write(hdr[len(digestPrefix)+digestLen:])
	return hex.EncodeToString(h.Sum(nil))
}

// verifyDigest checks the digest of a header that starts with digestPrefix; it reports false,
// nil when hdr does not start so (then the metadata must not claim a digest).
func verifyDigest(file string, hdr []byte) (bool, error) {
	if !bytes.HasPrefix(hdr, []byte(digestPrefix)) {
		return false, nil
	}
	field := metaKey + "." + keyDigest
	if len(hdr) < len(digestPrefix)+digestLen+1 || hdr[len(digestPrefix)+digestLen] != '"' {
		return false, formatErr(file, field, "not %d hex digits", digestLen)
	}
	stored := string(hdr[len(digestPrefix) : len(digestPrefix)+digestLen])
	if got := headerDigest(hdr); got != stored {
		return false, formatErr(file, field, "header checksum mismatch: the header (record, metadata or tensor table) changed after it was written (computed %s, stored %s); the file is corrupt: use another checkpoint", got, stored)
	}
	return true, nil
}

// encodeSignedHeader returns the padded header of tensors: "__metadata__" with the header
// digest first (its 64 digits filled in once the rest is known), the data's CRC-32C, then meta
// in order, then one entry per tensor in the given order (tensorfile.EncodeHeader's checks).
func encodeSignedHeader(tensors []Tensor, meta []tensorfile.Meta) ([]byte, error) {
	kv := append([]tensorfile.Meta{{Key: keyDigest, Value: strings.Repeat("0", digestLen)}, {Key: keyCRC, Value: tensorfile.DataCRC(tensors)}}, meta...)
	hdr, err := tensorfile.EncodeHeader(tensors, kv)
	if err != nil {
		return nil, err
	}
	copy(hdr[len(digestPrefix):], headerDigest(hdr))
	return hdr, nil
}

// Encode writes r to w in the safetensors format: the tensors in r's order, the rest of the
// record as JSON under the header's "__metadata__" key "nitro.record".
func Encode(w io.Writer, r *Record) error {
	hdr, err := encodeHeader(r)
	if err != nil {
		return err
	}
	return writeEncoded(w, hdr, r)
}

// writeEncoded writes the length prefix, hdr (from encodeHeader(r)) and r's tensor data.
func writeEncoded(w io.Writer, hdr []byte, r *Record) error {
	return tensorfile.WriteEncoded(w, hdr, r.Tensors)
}

// parsed is a validated header and whether its digest was present and matched.
type parsed struct {
	*tensorfile.Header
	signed bool
}

// codecErr turns the codec's *tensorfile.FormatError into this package's, naming the same file
// and field, so that a caller matches one error type for every defect of a checkpoint.
func codecErr(err error) error {
	var fe *tensorfile.FormatError
	if errors.As(err, &fe) {
		return &FormatError{File: fe.File, Field: fe.Field, Msg: fe.Msg}
	}
	return err
}

// decodeHeader reads and validates the header of a file of the given size, leaving r at the
// start of the data section.
func decodeHeader(file string, r io.Reader, size int64) (*parsed, error) {
	hdr, err := tensorfile.ReadRawHeader(file, r, size)
	if err != nil {
		return nil, codecErr(err)
	}
	// The digest first: a corrupt header is reported as such, not as whatever its JSON became.
	signed, err := verifyDigest(file, hdr)
	if err != nil {
		return nil, err
	}
	h, err := tensorfile.ParseHeader(file, hdr, size)
	if err != nil {
		return nil, codecErr(err)
	}
	if _, ok := h.Meta[keyDigest]; ok && !signed {
		return nil, formatErr(file, metaKey+"."+keyDigest, "not at the start of the header, where the writer puts it")
	}
	return &parsed{Header: h, signed: signed}, nil
}

// decodeTensors reads a whole file: the validated header, then the data, exactly as much as the
// header describes, checked against the header's CRC-32C.
func decodeTensors(file string, r io.Reader, size int64) (*parsed, []Tensor, error) {
	p, err := decodeHeader(file, r, size)
	if err != nil {
		return nil, nil, err
	}
	tensors, err := tensorfile.ReadData(file, p.Header, r)
	if err != nil {
		return nil, nil, codecErr(err)
	}
	return p, tensors, nil
}

// recordMetaOf decodes the "nitro.record" metadata of a validated header: the format version
// first (an older file says so by name), then the header digest, then the record, strictly.
func recordMetaOf(file string, p *parsed) (*recordMeta, error) {
	if p.Meta == nil {
		return nil, formatErr(file, metaKey, "missing: not a nitro checkpoint")
	}
	if f, ok := p.Meta[keyFormat]; !ok {
		return nil, formatErr(file, metaKey+"."+keyFormat, "missing: not a nitro checkpoint")
	} else if f == "1" {
		return nil, formatErr(file, metaKey+"."+keyFormat, "version 1, written by an older nitro whose header (epoch, step, the record) had no checksum; this reader knows only version %d, so it cannot verify that record: resume or evaluate it with the nitro that wrote it, or start a new run", recordFormat)
	} else if f != strconv.Itoa(recordFormat) {
		return nil, formatErr(file, metaKey+"."+keyFormat, "version %q, this reader knows %d", f, recordFormat)
	}
	if !p.signed {
		return nil, formatErr(file, metaKey+"."+keyDigest, "missing: a version %d checkpoint carries its header's checksum first", recordFormat)
	}
	raw, ok := p.Meta[keyRecord]
	if !ok {
		return nil, formatErr(file, metaKey+"."+keyRecord, "missing")
	}
	m, err := decodeRecordMeta(file, []byte(raw))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// The record's keys: those always written (a missing one is an error), the rest optional.
var (
	recordRequired = []string{"format", "epoch", "step", "values", "position"}
	recordOptional = []string{"metrics", "stop_reason", "preset", "run_id", "run_url", "derived",
		"anchor_checksums", "logger_type", "logger_state", "rng_state", "build", "control", "mixed_precision", "accum"}
	positionRequired = []string{"epoch", "batch"}
	positionOptional = []string{"global_batch", "epoch_batches"}
)

// decodeRecordMeta decodes the record JSON refusing a duplicate, unknown or missing key (naming
// it) and a value out of bounds: encoding/json alone would ignore a renamed key and default it.
func decodeRecordMeta(file string, raw []byte) (*recordMeta, error) {
	field := metaKey + "." + keyRecord
	// Nesting first, in one pass over the bytes, before anything parses them: a hostile record
	// nested 200k levels costs a scan, not a parser's time.
	if err := tensorfile.CheckDepth(raw, tensorfile.MaxJSONDepth); err != nil {
		return nil, formatErr(file, field, "%v", err)
	}
	if err := checkKeys(raw, recordRequired, recordOptional); err != nil {
		return nil, formatErr(file, field, "%v", err)
	}
	if err := tensorfile.CheckUniqueKeys(raw); err != nil { // nested values too (metrics, states)
		return nil, formatErr(file, field, "%v", err)
	}
	var m recordMeta
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, formatErr(file, field, "%v", err)
	}
	if m.Format != recordFormat {
		return nil, formatErr(file, field+".format", "version %d, this reader knows %d", m.Format, recordFormat)
	}
	var top map[string]json.RawMessage
	json.Unmarshal(raw, &top) // checkKeys parsed it already
	if err := checkKeys(top["position"], positionRequired, positionOptional); err != nil {
		return nil, formatErr(file, field+".position", "%v", err)
	}
	if f, msg := outOfBounds(m.Epoch, m.Step, m.Position); f != "" {
		return nil, formatErr(file, field+"."+f, "%s", msg)
	}
	if m.Accum < 0 || m.Accum > MaxStep {
		return nil, formatErr(file, field+".accum", "%s", boundMsg(m.Accum, MaxStep))
	}
	return &m, nil
}

// expectDelim reads one token and requires it to be d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return fmt.Errorf("expected %q, found %v", d, tok)
	}
	return nil
}

// checkKeys requires raw to be one JSON object whose keys are distinct, each of required or
// optional, with every required one present.
func checkKeys(raw []byte, required, optional []string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // a key is always a string here
		switch {
		case seen[key]:
			return fmt.Errorf("key %q: duplicate", key)
		case !slices.Contains(required, key) && !slices.Contains(optional, key):
			return fmt.Errorf("key %q: unknown", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("key %q: %v", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	for _, k := range required {
		if !seen[k] {
			return fmt.Errorf("key %q: missing", k)
		}
	}
	return nil
}

// MaxEpoch and MaxStep bound a checkpoint's counters (the record's, the data position's and the
// manifest's): beyond them a value is corruption, not progress. MaxStep is the largest integer a
// float64 JSON reader still holds exactly.
const (
	MaxEpoch = 1<<31 - 1
	MaxStep  = 1<<53 - 1
)

// outOfBounds names the first counter outside [0, MaxEpoch] or [0, MaxStep] ("epoch", "step",
// "position.epoch", "position.batch", ...) or the position field that disagrees with the others
// (Position.inconsistent), and says why; "" when all are in bounds.
func outOfBounds(epoch, step int, pos Position) (field, msg string) {
	for _, c := range []struct {
		name   string
		v, max int
	}{{"epoch", epoch, MaxEpoch}, {"step", step, MaxStep}, {"position.epoch", pos.Epoch, MaxEpoch}, {"position.batch", pos.Batch, MaxStep},
		{"position.global_batch", pos.GlobalBatch, MaxStep}, {"position.epoch_batches", pos.EpochBatches, MaxStep}} {
		if c.v < 0 || c.v > c.max {
			return c.name, boundMsg(c.v, c.max)
		}
	}
	return pos.inconsistent()
}

func boundMsg(v, max int) string {
	if v < 0 {
		return fmt.Sprintf("%d is negative", v)
	}
	return fmt.Sprintf("%d is past the bound %d", v, max)
}

// decode reads a whole record from r, which holds size bytes; file names it in errors.
func decode(file string, r io.Reader, size int64) (*Record, error) {
	p, tensors, err := decodeTensors(file, r, size)
	if err != nil {
		return nil, err
	}
	m, err := recordMetaOf(file, p)
	if err != nil {
		return nil, err
	}
	rec := &Record{Tensors: tensors}
	m.apply(rec)
	return rec, nil
}
