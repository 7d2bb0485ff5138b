package checkpoint

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The safetensors layout: an 8-byte little-endian header length n, n bytes of JSON header
// (padded with spaces so the data starts 8-aligned), then the tensors' bytes back to back.
const (
	maxHeaderLen = 100_000_000 // the reference implementation's bound
	metaKey      = "__metadata__"

	keyFormat = "nitro.format"        // strconv.Itoa(recordFormat)
	keyRecord = "nitro.record"        // JSON of recordMeta
	keyCRC    = "nitro.crc32c"        // CRC-32C (Castagnoli) of the data section, 8 hex digits
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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

// tensorBytes is product(shape)*size, or an error on a negative dim or an overflow of int64.
func tensorBytes(dt DType, shape []int) (uint64, error) {
	size := dt.Size()
	if size == 0 {
		return 0, fmt.Errorf("unknown dtype %q", dt)
	}
	n := uint64(size)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dim %d is negative (%d)", i, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v overflows the byte count", shape)
		}
		n = lo
	}
	return n, nil
}

// encodeHeader validates r and returns the padded header bytes: the tensors, then the record's
// metadata (the data checksum, the format version, the record as JSON).
func encodeHeader(r *Record) ([]byte, error) {
	// A negative epoch or step would resume before the run began; Save and the manifest refuse
	// one too, so a record written by Write alone cannot carry it either.
	if r.Epoch < 0 || r.Step < 0 {
		return nil, fmt.Errorf("checkpoint: record epoch %d, step %d: negative; both count from 0", r.Epoch, r.Step)
	}
	meta, err := json.Marshal(metaOf(r))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: record metadata: %w", err)
	}
	if f, msg := outOfBounds(r.Epoch, r.Step, r.Position); f != "" {
		return nil, fmt.Errorf("checkpoint: record %s: %s", f, msg)
	}
	return encodeTensorHeader(r.Tensors, [][2]string{{keyFormat, strconv.Itoa(recordFormat)}, {keyRecord, string(meta)}}, true)
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

// encodeTensorHeader validates tensors (names, dtypes, byte counts) and returns the padded
// header: "__metadata__" with the header digest first when signed, the data's CRC-32C, then meta
// in order, then one entry per tensor with contiguous data_offsets in the given order.
func encodeTensorHeader(tensors []Tensor, meta [][2]string, signed bool) ([]byte, error) {
	seen := make(map[string]bool, len(tensors))
	crc := crc32.New(castagnoli)
	var total uint64
	offsets := make([][2]uint64, len(tensors))
	for i, t := range tensors {
		switch {
		case t.Name == "" || t.Name == metaKey:
			return nil, fmt.Errorf("checkpoint: tensor %d: name %q is reserved", i, t.Name)
		case !utf8.ValidString(t.Name):
			return nil, fmt.Errorf("checkpoint: tensor %d: name %q is not UTF-8", i, t.Name)
		case seen[t.Name]:
			return nil, fmt.Errorf("checkpoint: tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		n, err := tensorBytes(t.DType, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: tensor %q: %w", t.Name, err)
		}
		if uint64(len(t.Data)) != n {
			return nil, fmt.Errorf("checkpoint: tensor %q: %d bytes of data, %s %v needs %d",
				t.Name, len(t.Data), t.DType, t.Shape, n)
		}
		offsets[i] = [2]uint64{total, total + n}
		total += n
		crc.Write(t.Data)
	}
	var h bytes.Buffer
	h.WriteString(`{"` + metaKey + `":{`)
	if signed {
		writeKV(&h, keyDigest, string(bytes.Repeat([]byte{'0'}, digestLen))) // filled in below
		h.WriteByte(',')
	}
	writeKV(&h, keyCRC, hex.EncodeToString(crc.Sum(nil)))
	for _, kv := range meta {
		if kv[0] == keyCRC || kv[0] == keyDigest {
			return nil, fmt.Errorf("checkpoint: metadata key %q is reserved", kv[0])
		}
		h.WriteByte(',')
		writeKV(&h, kv[0], kv[1])
	}
	h.WriteByte('}')
	for i, t := range tensors {
		h.WriteByte(',')
		writeString(&h, t.Name)
		h.WriteString(`:{"dtype":"` + string(t.DType) + `","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, offsets[i][0], offsets[i][1])
	}
	h.WriteByte('}')
	for (8+h.Len())%8 != 0 {
		h.WriteByte(' ')
	}
	if h.Len() > maxHeaderLen {
		return nil, fmt.Errorf("checkpoint: header of %d bytes exceeds %d", h.Len(), maxHeaderLen)
	}
	hdr := h.Bytes()
	if signed {
		copy(hdr[len(digestPrefix):], headerDigest(hdr))
	}
	return hdr, nil
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

func writeKV(b *bytes.Buffer, k, v string) {
	writeString(b, k)
	b.WriteByte(':')
	writeString(b, v)
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
func writeEncoded(w io.Writer, hdr []byte, r *Record) error { return writeTensors(w, hdr, r.Tensors) }

// writeTensors writes the length prefix, hdr and the tensors' data in order.
func writeTensors(w io.Writer, hdr []byte, tensors []Tensor) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	bw.Write(n[:])
	bw.Write(hdr)
	for _, t := range tensors {
		bw.Write(t.Data) // a large slice goes straight through to w
	}
	return bw.Flush()
}

// EncodeTensors writes tensors, in order, and string metadata as a plain safetensors file: the
// format under a Record, for other artifacts (an export bundle's weights). The metadata also
// carries the data's CRC-32C, which DecodeTensors checks.
func EncodeTensors(w io.Writer, tensors []Tensor, meta map[string]string) error {
	kv := make([][2]string, 0, len(meta))
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		kv = append(kv, [2]string{k, meta[k]})
	}
	hdr, err := encodeTensorHeader(tensors, kv, false)
	if err != nil {
		return err
	}
	return writeTensors(w, hdr, tensors)
}

// DecodeTensors reads a safetensors file held in data with every check Read makes (header
// bound, JSON with no duplicate key, dtypes, overflow-checked sizes, offsets tiling the data
// exactly, the CRC-32C when the metadata has one) and returns its tensors in data order, their
// Data aliasing data, and its metadata. file names it in errors (*FormatError).
func DecodeTensors(file string, data []byte) ([]Tensor, map[string]string, error) {
	p, tensors, err := decodeTensors(file, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	return tensors, p.meta, nil
}

// entry is one tensor as the header describes it.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	begin, end uint64
	index      int // position in the header
}

// parsed is a validated header.
type parsed struct {
	hdrLen  uint64
	entries []entry // in data order
	meta    map[string]string
	dataLen uint64
	signed  bool // the header digest was present and matched
}

// decodeHeader reads and validates the header of a file of the given size, leaving r at the
// start of the data section.
func decodeHeader(file string, r io.Reader, size int64) (*parsed, error) {
	if size < 8 {
		return nil, formatErr(file, "header length", "file is %d bytes, shorter than the 8-byte length prefix", size)
	}
	var nb [8]byte
	if _, err := io.ReadFull(r, nb[:]); err != nil {
		return nil, formatErr(file, "header length", "read: %v", err)
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > maxHeaderLen {
		return nil, formatErr(file, "header length", "%d exceeds the %d-byte bound", n, maxHeaderLen)
	}
	if n > uint64(size-8) {
		return nil, formatErr(file, "header length", "%d exceeds the %d bytes after the prefix", n, size-8)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, formatErr(file, "header", "read: %v", err)
	}
	// The digest first: a corrupt header is reported as such, not as whatever its JSON became.
	signed, err := verifyDigest(file, hdr)
	if err != nil {
		return nil, err
	}
	p, err := parseHeader(file, hdr)
	if err != nil {
		return nil, err
	}
	if _, ok := p.meta[keyDigest]; ok && !signed {
		return nil, formatErr(file, metaKey+"."+keyDigest, "not at the start of the header, where the writer puts it")
	}
	p.hdrLen, p.signed = n, signed
	if err := p.validate(file, uint64(size)-8-n); err != nil {
		return nil, err
	}
	return p, nil
}

// parseHeader walks the JSON header token by token, so that a duplicate key, which
// encoding/json would silently resolve to the last one, is refused.
func parseHeader(file string, hdr []byte) (*parsed, error) {
	if !utf8.Valid(hdr) {
		return nil, formatErr(file, "header", "not valid UTF-8")
	}
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, formatErr(file, "header", "does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	bad := func(field string, err error) error {
		return formatErr(file, field, "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("header", err)
	}
	p := &parsed{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("header", err)
		}
		key, ok := tok.(string)
		if !ok { // the decoder only yields strings in key position; be safe anyway
			return nil, formatErr(file, "header", "expected a key, found %s", describe(tok))
		}
		if seen[key] {
			return nil, formatErr(file, strconv.Quote(key), "duplicate key")
		}
		seen[key] = true
		if key == metaKey {
			if p.meta, err = parseMeta(file, dec); err != nil {
				return nil, err
			}
			continue
		}
		e, err := parseEntry(file, key, dec)
		if err != nil {
			return nil, err
		}
		e.index = len(p.entries)
		p.entries = append(p.entries, e)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, bad("header", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, formatErr(file, "header", "data after the JSON object")
	}
	return p, nil
}

// expectDelim reads one token and requires it to be d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return fmt.Errorf("expected %q, found %v", d, describe(tok))
	}
	return nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return strconv.Quote(v.String())
	case string:
		return "string " + strconv.Quote(v)
	case json.Number:
		return "number " + v.String()
	case bool:
		return "bool " + strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

func parseMeta(file string, dec *json.Decoder) (map[string]string, error) {
	field := metaKey
	tok, err := dec.Token()
	if err != nil {
		return nil, formatErr(file, field, "invalid JSON: %v", err)
	}
	if tok == nil { // the reference reader accepts "__metadata__": null
		return map[string]string{}, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, formatErr(file, field, "expected an object of strings, found %s", describe(tok))
	}
	meta := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, formatErr(file, field, "invalid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, formatErr(file, field, "expected a key, found %s", describe(tok))
		}
		kf := field + "." + key
		if _, dup := meta[key]; dup {
			return nil, formatErr(file, kf, "duplicate key")
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, formatErr(file, kf, "invalid JSON: %v", err)
		}
		s, ok := tok.(string)
		if !ok {
			return nil, formatErr(file, kf, "value is %s, not a string", describe(tok))
		}
		meta[key] = s
	}
	if _, err := dec.Token(); err != nil {
		return nil, formatErr(file, field, "invalid JSON: %v", err)
	}
	return meta, nil
}

func parseEntry(file, name string, dec *json.Decoder) (entry, error) {
	e := entry{name: name}
	field := "tensor " + strconv.Quote(name)
	fail := func(sub, format string, args ...any) (entry, error) {
		f := field
		if sub != "" {
			f += "." + sub
		}
		return entry{}, formatErr(file, f, format, args...)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return fail("", "%v", err)
	}
	got := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail("", "invalid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return fail("", "expected a key, found %s", describe(tok))
		}
		if got[key] {
			return fail(key, "duplicate key")
		}
		got[key] = true
		switch key {
		case "dtype":
			tok, err := dec.Token()
			if err != nil {
				return fail(key, "invalid JSON: %v", err)
			}
			s, ok := tok.(string)
			if !ok {
				return fail(key, "expected a string, found %s", describe(tok))
			}
			if DType(s).Size() == 0 {
				return fail(key, "unknown dtype %q", s)
			}
			e.dtype = DType(s)
		case "shape":
			dims, err := parseUints(dec, -1)
			if err != nil {
				return fail(key, "%v", err)
			}
			e.shape = make([]int, len(dims))
			for i, d := range dims {
				if d > math.MaxInt {
					return fail(key, "dim %d (%d) is too large", i, d)
				}
				e.shape[i] = int(d)
			}
		case "data_offsets":
			offs, err := parseUints(dec, 2)
			if err != nil {
				return fail(key, "%v", err)
			}
			e.begin, e.end = offs[0], offs[1]
		default:
			return fail(key, "unknown key")
		}
	}
	if _, err := dec.Token(); err != nil {
		return fail("", "invalid JSON: %v", err)
	}
	for _, k := range []string{"dtype", "shape", "data_offsets"} {
		if !got[k] {
			return fail(k, "missing")
		}
	}
	return e, nil
}

// parseUints reads an array of non-negative integers; want >= 0 requires that many.
func parseUints(dec *json.Decoder, want int) ([]uint64, error) {
	if err := expectDelim(dec, '['); err != nil {
		return nil, err
	}
	var out []uint64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, fmt.Errorf("element %d is %s, not a non-negative integer", len(out), describe(tok))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("element %d (%s) is not a non-negative integer", len(out), num)
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if want >= 0 && len(out) != want {
		return nil, fmt.Errorf("has %d elements, want %d", len(out), want)
	}
	return out, nil
}

// validate checks each tensor's byte range against its dtype and shape and that the ranges
// tile the data section exactly: contiguous from 0, no overlap, no hole, nothing after.
func (p *parsed) validate(file string, dataLen uint64) error {
	for _, e := range p.entries {
		field := "tensor " + strconv.Quote(e.name)
		if e.end < e.begin {
			return formatErr(file, field+".data_offsets", "end %d before begin %d", e.end, e.begin)
		}
		n, err := tensorBytes(e.dtype, e.shape)
		if err != nil {
			return formatErr(file, field+".shape", "%v", err)
		}
		if e.end-e.begin != n {
			return formatErr(file, field+".data_offsets", "[%d,%d] is %d bytes, %s %v needs %d",
				e.begin, e.end, e.end-e.begin, e.dtype, e.shape, n)
		}
	}
	slices.SortStableFunc(p.entries, func(a, b entry) int {
		if a.begin != b.begin {
			return cmp.Compare(a.begin, b.begin)
		}
		return cmp.Compare(a.end, b.end)
	})
	var pos uint64
	for _, e := range p.entries {
		field := "tensor " + strconv.Quote(e.name) + ".data_offsets"
		switch {
		case e.begin > pos:
			return formatErr(file, field, "hole: begins at %d, the previous tensor ends at %d", e.begin, pos)
		case e.begin < pos:
			return formatErr(file, field, "overlap: begins at %d, the previous tensor ends at %d", e.begin, pos)
		}
		pos = e.end
	}
	if pos != dataLen {
		return formatErr(file, "data_offsets", "tensors cover %d bytes, the file holds %d after the header", pos, dataLen)
	}
	p.dataLen = dataLen
	return nil
}

// decodeTensors reads a whole file: the validated header, then the data, exactly dataLen bytes.
func decodeTensors(file string, r io.Reader, size int64) (*parsed, []Tensor, error) {
	p, err := decodeHeader(file, r, size)
	if err != nil {
		return nil, nil, err
	}
	data := make([]byte, p.dataLen)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, nil, formatErr(file, "data", "read %d bytes: %v", p.dataLen, err)
	}
	var extra [1]byte
	if k, _ := r.Read(extra[:]); k != 0 {
		return nil, nil, formatErr(file, "data", "the file grew while it was read")
	}
	if want, ok := p.meta[keyCRC]; ok {
		got := hex.EncodeToString(binaryCRC(data))
		if got != want {
			return nil, nil, formatErr(file, metaKey+"."+keyCRC, "data checksum is %s, the header says %s", got, want)
		}
	}
	tensors := make([]Tensor, len(p.entries))
	for i, e := range p.entries {
		tensors[i] = Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Data: data[e.begin:e.end:e.end]}
	}
	return p, tensors, nil
}

func binaryCRC(data []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, castagnoli))
}

// recordMetaOf decodes the "nitro.record" metadata of a validated header: the format version
// first (an older file says so by name), then the header digest, then the record, strictly.
func recordMetaOf(file string, p *parsed) (*recordMeta, error) {
	if p.meta == nil {
		return nil, formatErr(file, metaKey, "missing: not a nitro checkpoint")
	}
	if f, ok := p.meta[keyFormat]; !ok {
		return nil, formatErr(file, metaKey+"."+keyFormat, "missing: not a nitro checkpoint")
	} else if f == "1" {
		return nil, formatErr(file, metaKey+"."+keyFormat, "version 1, written by an older nitro whose header (epoch, step, the record) had no checksum; this reader knows only version %d, so it cannot verify that record: resume or evaluate it with the nitro that wrote it, or start a new run", recordFormat)
	} else if f != strconv.Itoa(recordFormat) {
		return nil, formatErr(file, metaKey+"."+keyFormat, "version %q, this reader knows %d", f, recordFormat)
	}
	if !p.signed {
		return nil, formatErr(file, metaKey+"."+keyDigest, "missing: a version %d checkpoint carries its header's checksum first", recordFormat)
	}
	raw, ok := p.meta[keyRecord]
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
		"anchor_checksums", "logger_type", "logger_state", "rng_state", "build", "control"}
	positionRequired = []string{"epoch", "batch"}
)

// decodeRecordMeta decodes the record JSON refusing a duplicate, unknown or missing key (naming
// it) and a value out of bounds: encoding/json alone would ignore a renamed key and default it.
func decodeRecordMeta(file string, raw []byte) (*recordMeta, error) {
	field := metaKey + "." + keyRecord
	if err := checkKeys(raw, recordRequired, recordOptional); err != nil {
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
	if err := checkKeys(top["position"], positionRequired, nil); err != nil {
		return nil, formatErr(file, field+".position", "%v", err)
	}
	if f, msg := outOfBounds(m.Epoch, m.Step, m.Position); f != "" {
		return nil, formatErr(file, field+"."+f, "%s", msg)
	}
	return &m, nil
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
// "position.epoch", "position.batch") and says why; "" when all are in bounds.
func outOfBounds(epoch, step int, pos Position) (field, msg string) {
	for _, c := range []struct {
		name   string
		v, max int
	}{{"epoch", epoch, MaxEpoch}, {"step", step, MaxStep}, {"position.epoch", pos.Epoch, MaxEpoch}, {"position.batch", pos.Batch, MaxStep}} {
		if c.v < 0 || c.v > c.max {
			return c.name, boundMsg(c.v, c.max)
		}
	}
	return "", ""
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
