package tensorfile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The safetensors layout: an 8-byte little-endian header length n, n bytes of JSON header
// (padded with spaces so that the data starts 8-aligned), then the tensors' bytes back to back.
const (
	// MaxHeaderLen bounds the JSON header, as the reference implementation does: a reader never
	// allocates more on a file's say-so.
	MaxHeaderLen = 100_000_000
	// MetadataKey is the header's key for the string-to-string metadata.
	MetadataKey = "__metadata__"
	// CRCKey is the metadata key of the data section's CRC-32C (Castagnoli), 8 hex digits:
	// Encode writes it, ReadData checks it when present.
	CRCKey = "nitro.crc32c"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FormatError is a file that is not a valid safetensors file: File names it, Field the part at
// fault ("header length", `tensor "w".shape`, "__metadata__.k", …).
type FormatError struct {
	File  string
	Field string
	Msg   string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("tensorfile: %s: %s: %s", e.File, e.Field, e.Msg)
}

func formatErr(file, field, format string, args ...any) error {
	return &FormatError{File: file, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Meta is one metadata entry; EncodeHeader writes them in the order given.
type Meta struct{ Key, Value string }

// DataCRC is the CRC-32C of the tensors' data in order, as CRCKey carries it.
func DataCRC(tensors []Tensor) string {
	crc := crc32.New(castagnoli)
	for _, t := range tensors {
		crc.Write(t.Data)
	}
	return hex.EncodeToString(crc.Sum(nil))
}

// EncodeHeader validates tensors (names, dtypes, byte counts) and returns the padded JSON header
// without its length prefix: "__metadata__" holding meta in the given order (no entry is added:
// a caller that wants the checksum passes {CRCKey, DataCRC(tensors)}), then one entry per tensor
// with contiguous data_offsets in the given order. A caller that signs the header may fill a
// placeholder value in place afterwards, as long as the length does not change.
func EncodeHeader(tensors []Tensor, meta []Meta) ([]byte, error) {
	seen := make(map[string]bool, len(tensors))
	var total uint64
	offsets := make([][2]uint64, len(tensors))
	for i, t := range tensors {
		switch {
		case t.Name == "" || t.Name == MetadataKey:
			return nil, fmt.Errorf("tensorfile: tensor %d: name %q is reserved", i, t.Name)
		case !utf8.ValidString(t.Name):
			return nil, fmt.Errorf("tensorfile: tensor %d: name %q is not UTF-8", i, t.Name)
		case seen[t.Name]:
			return nil, fmt.Errorf("tensorfile: tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		n, err := ByteSize(t.DType, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensorfile: tensor %q: %w", t.Name, err)
		}
		if uint64(len(t.Data)) != n {
			return nil, fmt.Errorf("tensorfile: tensor %q: %d bytes of data, %s %v needs %d",
				t.Name, len(t.Data), t.DType, t.Shape, n)
		}
		offsets[i] = [2]uint64{total, total + n}
		total += n
	}
	keys := make(map[string]bool, len(meta))
	var h bytes.Buffer
	h.WriteString(`{"` + MetadataKey + `":{`)
	for i, kv := range meta {
		if keys[kv.Key] {
			return nil, fmt.Errorf("tensorfile: metadata key %q appears twice", kv.Key)
		}
		keys[kv.Key] = true
		if !utf8.ValidString(kv.Key) || !utf8.ValidString(kv.Value) {
			return nil, fmt.Errorf("tensorfile: metadata key %q: not UTF-8", kv.Key)
		}
		if i > 0 {
			h.WriteByte(',')
		}
		writeString(&h, kv.Key)
		h.WriteByte(':')
		writeString(&h, kv.Value)
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
	if h.Len() > MaxHeaderLen {
		return nil, fmt.Errorf("tensorfile: header of %d bytes exceeds %d", h.Len(), MaxHeaderLen)
	}
	return h.Bytes(), nil
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// WriteEncoded writes the length prefix, hdr (from EncodeHeader(tensors, …)) and the tensors'
// data in order.
func WriteEncoded(w io.Writer, hdr []byte, tensors []Tensor) error {
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

// Encode writes tensors, in order, and string metadata as a plain safetensors file; the
// metadata, in key order, follows the data's CRC-32C (CRCKey, which meta must not hold).
func Encode(w io.Writer, tensors []Tensor, meta map[string]string) error {
	if _, ok := meta[CRCKey]; ok {
		return fmt.Errorf("tensorfile: metadata key %q is reserved for the data's checksum", CRCKey)
	}
	kv := []Meta{{CRCKey, DataCRC(tensors)}}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		kv = append(kv, Meta{k, meta[k]})
	}
	hdr, err := EncodeHeader(tensors, kv)
	if err != nil {
		return err
	}
	return WriteEncoded(w, hdr, tensors)
}

// Entry is one tensor as a header describes it.
type Entry struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End uint64 // the byte range within the data section
}

// Header is a validated header.
type Header struct {
	Len     uint64            // bytes of JSON after the 8-byte length prefix
	Entries []Entry           // in data order
	Meta    map[string]string // nil when the header has no "__metadata__" key
	DataLen uint64            // bytes of data after the header, exactly what the entries tile
}

// ReadRawHeader reads the length prefix and the header bytes of a file of size bytes, checking
// the length against MaxHeaderLen and the size first; r is left at the start of the data.
func ReadRawHeader(file string, r io.Reader, size int64) ([]byte, error) {
	if size < 8 {
		return nil, formatErr(file, "header length", "file is %d bytes, shorter than the 8-byte length prefix", size)
	}
	var nb [8]byte
	if _, err := io.ReadFull(r, nb[:]); err != nil {
		return nil, formatErr(file, "header length", "read: %v", err)
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > MaxHeaderLen {
		return nil, formatErr(file, "header length", "%d exceeds the %d-byte bound", n, MaxHeaderLen)
	}
	if n > uint64(size-8) {
		return nil, formatErr(file, "header length", "%d exceeds the %d bytes after the prefix", n, size-8)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, formatErr(file, "header", "read: %v", err)
	}
	return hdr, nil
}

// ParseHeader parses raw (from ReadRawHeader) and validates it against a file of size bytes:
// JSON with no duplicate key, known dtypes, overflow-checked sizes, and byte ranges that tile the
// data section exactly (contiguous from 0, no overlap, no hole, nothing after).
func ParseHeader(file string, raw []byte, size int64) (*Header, error) {
	h, err := parseHeader(file, raw)
	if err != nil {
		return nil, err
	}
	h.Len = uint64(len(raw))
	if size < 8+int64(len(raw)) {
		return nil, formatErr(file, "header length", "%d exceeds the %d bytes after the prefix", len(raw), max(size-8, 0))
	}
	if err := h.validate(file, uint64(size)-8-h.Len); err != nil {
		return nil, err
	}
	return h, nil
}

// ReadHeader reads and validates the header of a file of size bytes (ReadRawHeader, then
// ParseHeader), leaving r at the start of the data.
func ReadHeader(file string, r io.Reader, size int64) (*Header, error) {
	raw, err := ReadRawHeader(file, r, size)
	if err != nil {
		return nil, err
	}
	return ParseHeader(file, raw, size)
}

// parseHeader walks the JSON header token by token, so that a duplicate key, which
// encoding/json would silently resolve to the last one, is refused.
func parseHeader(file string, hdr []byte) (*Header, error) {
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
	p := &Header{}
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
		if key == MetadataKey {
			if p.Meta, err = parseMeta(file, dec); err != nil {
				return nil, err
			}
			continue
		}
		e, err := parseEntry(file, key, dec)
		if err != nil {
			return nil, err
		}
		p.Entries = append(p.Entries, e)
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
	field := MetadataKey
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

func parseEntry(file, name string, dec *json.Decoder) (Entry, error) {
	e := Entry{Name: name}
	field := "tensor " + strconv.Quote(name)
	fail := func(sub, format string, args ...any) (Entry, error) {
		f := field
		if sub != "" {
			f += "." + sub
		}
		return Entry{}, formatErr(file, f, format, args...)
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
			if !DType(s).Valid() {
				return fail(key, "unknown dtype %q", s)
			}
			e.DType = DType(s)
		case "shape":
			dims, err := parseUints(dec, -1)
			if err != nil {
				return fail(key, "%v", err)
			}
			e.Shape = make([]int, len(dims))
			for i, d := range dims {
				if d > math.MaxInt {
					return fail(key, "dim %d (%d) is too large", i, d)
				}
				e.Shape[i] = int(d)
			}
		case "data_offsets":
			offs, err := parseUints(dec, 2)
			if err != nil {
				return fail(key, "%v", err)
			}
			e.Begin, e.End = offs[0], offs[1]
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
// tile the data section exactly, then puts the entries in data order.
func (p *Header) validate(file string, dataLen uint64) error {
	for _, e := range p.Entries {
		field := "tensor " + strconv.Quote(e.Name)
		if e.End < e.Begin {
			return formatErr(file, field+".data_offsets", "end %d before begin %d", e.End, e.Begin)
		}
		n, err := ByteSize(e.DType, e.Shape)
		if err != nil {
			return formatErr(file, field+".shape", "%v", err)
		}
		if e.End-e.Begin != n {
			return formatErr(file, field+".data_offsets", "[%d,%d] is %d bytes, %s %v needs %d",
				e.Begin, e.End, e.End-e.Begin, e.DType, e.Shape, n)
		}
	}
	slices.SortStableFunc(p.Entries, func(a, b Entry) int {
		if a.Begin != b.Begin {
			return cmp.Compare(a.Begin, b.Begin)
		}
		return cmp.Compare(a.End, b.End)
	})
	var pos uint64
	for _, e := range p.Entries {
		field := "tensor " + strconv.Quote(e.Name) + ".data_offsets"
		switch {
		case e.Begin > pos:
			return formatErr(file, field, "hole: begins at %d, the previous tensor ends at %d", e.Begin, pos)
		case e.Begin < pos:
			return formatErr(file, field, "overlap: begins at %d, the previous tensor ends at %d", e.Begin, pos)
		}
		pos = e.End
	}
	if pos != dataLen {
		return formatErr(file, "data_offsets", "tensors cover %d bytes, the file holds %d after the header", pos, dataLen)
	}
	p.DataLen = dataLen
	return nil
}

// ReadData reads the data section h describes from r (left there by ReadHeader): exactly
// h.DataLen bytes and nothing after, checked against CRCKey when the metadata has one. The
// tensors come back in data order, their Data slices of one buffer.
func ReadData(file string, h *Header, r io.Reader) ([]Tensor, error) {
	data := make([]byte, h.DataLen)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, formatErr(file, "data", "read %d bytes: %v", h.DataLen, err)
	}
	var extra [1]byte
	if k, _ := r.Read(extra[:]); k != 0 {
		return nil, formatErr(file, "data", "the file grew while it was read")
	}
	if want, ok := h.Meta[CRCKey]; ok {
		got := hex.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, castagnoli)))
		if got != want {
			return nil, formatErr(file, MetadataKey+"."+CRCKey, "data checksum is %s, the header says %s", got, want)
		}
	}
	tensors := make([]Tensor, len(h.Entries))
	for i, e := range h.Entries {
		tensors[i] = Tensor{Name: e.Name, DType: e.DType, Shape: e.Shape, Data: data[e.Begin:e.End:e.End]}
	}
	return tensors, nil
}

// Read reads a whole file of size bytes from r: ReadHeader, then ReadData.
func Read(file string, r io.Reader, size int64) (*Header, []Tensor, error) {
	h, err := ReadHeader(file, r, size)
	if err != nil {
		return nil, nil, err
	}
	ts, err := ReadData(file, h, r)
	if err != nil {
		return nil, nil, err
	}
	return h, ts, nil
}

// Decode reads a file held in data with every check Read makes and returns its tensors in data
// order, their Data copies of data's bytes, and its metadata (nil when it has none).
func Decode(file string, data []byte) ([]Tensor, map[string]string, error) {
	h, ts, err := Read(file, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	return ts, h.Meta, nil
}
