package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// minRecord is the record keys a version-2 record must have beside "format", as they appear
// escaped inside the "nitro.record" metadata string.
const minRecord = `\"epoch\":0,\"step\":0,\"values\":{},\"position\":{\"epoch\":0,\"batch\":0}`

// sign fills in the header digest of hdr, which starts with digestPrefix and 64 placeholder
// digits, by the rule stated independently of the writer: the SHA-256 of the 8-byte
// little-endian header length, then the header without those 64 digits.
func sign(hdr []byte) []byte {
	off := len(digestPrefix)
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))))
	h.Write(hdr[:off])
	h.Write(hdr[off+64:])
	copy(hdr[off:], hex.EncodeToString(h.Sum(nil)))
	return hdr
}

// signed is craft with a header digest: header must start with {"__metadata__":{ and the
// digest entry goes first inside it.
func signed(header string, data []byte) []byte {
	rest, ok := strings.CutPrefix(header, `{"__metadata__":{`)
	if !ok {
		panic("signed: header does not start with the metadata object")
	}
	if !strings.HasPrefix(rest, "}") {
		rest = "," + rest
	}
	hdr := sign([]byte(digestPrefix + strings.Repeat("0", 64) + `"` + rest))
	return craft(string(hdr), data)
}

// resign applies edit to a file's header and signs the result again: what a writer that got the
// record wrong would produce, for the checks behind the digest.
func resign(t *testing.T, file []byte, edit func(string) string) []byte {
	t.Helper()
	n := binary.LittleEndian.Uint64(file)
	hdr := edit(string(file[8 : 8+n]))
	if hdr == string(file[8:8+n]) {
		t.Fatal("resign: the edit changed nothing")
	}
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), append(sign([]byte(hdr)), file[8+n:]...)...)
}

// smallCheckpoint saves sampleRecord through a TopK into a fresh directory and returns the
// file's path and bytes.
func smallCheckpoint(t *testing.T) (string, []byte) {
	t.Helper()
	tk, err := NewTopK(2, "val_loss", "min", t.TempDir(), nil, fast)
	if err != nil {
		t.Fatal(err)
	}
	path, err := tk.Save(sampleRecord())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// wantFormatError requires a *FormatError naming file and a field containing field.
func wantFormatError(t *testing.T, what string, err error, file, field string) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("%s: error %v, want a *FormatError", what, err)
	}
	if fe.File != file || fe.Field == "" || !strings.Contains(fe.Field, field) || fe.Msg == "" {
		t.Fatalf("%s: error %q: want file %s and a field naming %q", what, err, file, field)
	}
}

func TestHeaderDigestRule(t *testing.T) {
	path, b := smallCheckpoint(t)
	n := binary.LittleEndian.Uint64(b)
	hdr := b[8 : 8+n]
	if !bytes.HasPrefix(hdr, []byte(digestPrefix)) {
		t.Fatalf("header does not start with %s: %.80s", digestPrefix, hdr)
	}
	again := sign(bytes.Clone(hdr))
	if !bytes.Equal(again, hdr) {
		t.Errorf("stored digest %.64s, the rule gives %.64s", hdr[len(digestPrefix):], again[len(digestPrefix):])
	}
	if _, err := Info(path); err != nil {
		t.Fatal(err)
	}
}

// TestHeaderFlipSweep changes every byte before the data of a real checkpoint, one at a time,
// by each single-bit flip and by inverting it, and requires Info and Read to refuse each with a
// *FormatError naming the file and a field. No flip is harmless: the digest covers every byte
// of the length prefix and the header, JSON whitespace and the alignment padding included, and
// a flip inside the stored digest no longer matches the rest.
func TestHeaderFlipSweep(t *testing.T) {
	path, b := smallCheckpoint(t)
	end := 8 + int(binary.LittleEndian.Uint64(b))
	masks := []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff}
	c := bytes.Clone(b)
	byDigest, other := 0, 0
	for i := range end {
		for _, mask := range masks {
			c[i] ^= mask
			_, err := decodeInfo(path, bytes.NewReader(c), int64(len(c)))
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != path || fe.Field == "" {
				t.Fatalf("byte %d ^ %#02x (%q -> %q): Info error %v, want a *FormatError naming the file", i, mask, b[i], c[i], err)
			}
			if fe.Field == metaKey+"."+keyDigest {
				byDigest++
			} else {
				other++
			}
			if _, err := decode(path, bytes.NewReader(c), int64(len(c))); !errors.As(err, &fe) {
				t.Fatalf("byte %d ^ %#02x: Read error %v, want a *FormatError", i, mask, err)
			}
			c[i] = b[i]
		}
	}
	t.Logf("%d bytes x %d flips refused: %d by the header checksum, %d by the length, JSON or key checks", end, len(masks), byDigest, other)
	if byDigest == 0 {
		t.Error("no flip was refused by the header checksum")
	}
}

// TestRecordEdits makes the edits a hand or a tool could make to the record: each is refused by
// the header checksum, and, signed again (a writer that got it wrong), by the record's own
// checks naming the key.
func TestRecordEdits(t *testing.T) {
	path, b := smallCheckpoint(t)
	for _, tc := range []struct {
		name, from, to, field, msg string
	}{
		{"epoch 6 to 5", `\"epoch\":6,`, `\"epoch\":5,`, "", ""},
		{"one bit of the step", `\"step\":4500,`, `\"step\":4501,`, "", ""},
		{"step renamed", `\"step\":`, `\"utep\":`, "nitro.record", `key "utep": unknown`},
		{"step removed", `\"step\":4500,`, ``, "nitro.record", `key "step": missing`},
		{"step twice", `\"step\":4500,`, `\"step\":4500,\"step\":1,`, "nitro.record", `key "step": duplicate`},
		{"position.batch renamed", `\"batch\":0,`, `\"batsh\":0,`, "nitro.record", `unknown field "batsh"`},
		{"position.batch removed", `,\"batch\":0,`, `,`, "nitro.record.position", `key "batch": missing`},
		{"position.global_batch alone", `,\"epoch_batches\":19}`, `}`, "nitro.record.position", "both are set or neither"},
		{"position.global_batch misspelt", `\"global_batch\":256`, `\"global_bacth\":256`, "nitro.record", `unknown field "global_bacth"`},
		{"position.global_batch negative", `\"global_batch\":256`, `\"global_batch\":-256`, "nitro.record.position.global_batch", "negative"},
		{"position.batch past the epoch", `\"batch\":0,`, `\"batch\":20,`, "nitro.record.position.batch", "past the epoch's 19 batches"},
		{"position samples past the bound", `\"batch\":0,\"global_batch\":256`, `\"batch\":4,\"global_batch\":4503599627370496`, "nitro.record.position.batch", "past the bound"},
		{"epoch past the bound", `\"epoch\":6,`, `\"epoch\":9223372036854775807,`, "nitro.record.epoch", "past the bound"},
		{"step negative", `\"step\":4500,`, `\"step\":-1,`, "nitro.record.step", "negative"},
	} {
		edit := func(h string) string { return strings.Replace(h, tc.from, tc.to, 1) }
		n := binary.LittleEndian.Uint64(b)
		plain := bytes.Clone(b)
		hdr := edit(string(b[8 : 8+n]))
		if len(hdr) == int(n) { // same length: the plain edit keeps the layout
			copy(plain[8:], hdr)
			_, err := decodeInfo(path, bytes.NewReader(plain), int64(len(plain)))
			wantFormatError(t, tc.name+" unsigned", err, path, keyDigest)
			if !strings.Contains(err.Error(), "checksum mismatch") {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
		if tc.field == "" {
			continue
		}
		re := resign(t, b, edit)
		_, err := decodeInfo(path, bytes.NewReader(re), int64(len(re)))
		wantFormatError(t, tc.name, err, path, tc.field)
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %q lacks %q", tc.name, err, tc.msg)
		}
		if _, err := decode(path, bytes.NewReader(re), int64(len(re))); err == nil {
			t.Errorf("%s: Read accepted it", tc.name)
		}
	}
}

// TestFormatVersion1Refused: a file of the previous layout (no header digest) is refused by name
// of its version, not read unchecked; a digest placed elsewhere than first is refused too.
func TestFormatVersion1Refused(t *testing.T) {
	v1 := craft(`{"__metadata__":{"nitro.crc32c":"00000000","nitro.format":"1","nitro.record":"{\"format\":1,`+minRecord+`}"}}`, nil)
	_, err := decodeInfo("old", bytes.NewReader(v1), int64(len(v1)))
	wantFormatError(t, "version 1", err, "old", keyFormat)
	if !strings.Contains(err.Error(), "version 1") {
		t.Errorf("error %q does not name version 1", err)
	}
	moved := craft(`{"__metadata__":{"nitro.format":"2","nitro.header_sha256":"`+strings.Repeat("0", 64)+`","nitro.record":"{\"format\":2,`+minRecord+`}"}}`, nil)
	_, err = decodeInfo("moved", bytes.NewReader(moved), int64(len(moved)))
	wantFormatError(t, "digest not first", err, "moved", keyDigest)
	ok := signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{\"format\":2,`+minRecord+`}"}}`, nil)
	if _, err := decodeInfo("ok", bytes.NewReader(ok), int64(len(ok))); err != nil {
		t.Errorf("a minimal signed record: %v", err)
	}
}

func TestWriteRefusesOutOfBounds(t *testing.T) {
	for name, r := range map[string]*Record{
		"record epoch":   {Epoch: MaxEpoch + 1},
		"record step":    {Step: MaxStep + 1},
		"position.batch": {Position: Position{Batch: -1}},
	} {
		field := strings.TrimPrefix(name, "record ")
		if err := Encode(new(bytes.Buffer), r); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: Encode error %v, want one naming %s", name, err, field)
		}
	}
	if err := Encode(new(bytes.Buffer), &Record{Epoch: MaxEpoch, Step: MaxStep}); err != nil {
		t.Errorf("the bounds themselves: %v", err)
	}
}

func TestManifestBounds(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"epoch 2^63-1":       {`{"version":1,"checkpoints":[{"file":"a","epoch":9223372036854775807,"step":1,"score":null}]}`, "checkpoints[0].epoch"},
		"step past 2^53":     {`{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":9007199254740992,"score":null}]}`, "checkpoints[0].step"},
		"score, no metric":   {`{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":1,"score":0.5}]}`, "checkpoints[0].metric"},
		"huge stop reason":   {`{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":1,"score":null,"stop_reason":"` + strings.Repeat("x", 2000) + `"}]}`, "checkpoints[0]"},
		"epoch past int64":   {`{"version":1,"checkpoints":[{"file":"a","epoch":9223372036854775808,"step":1,"score":null}]}`, "epoch"},
		"duplicate key":      {`{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":1,"score":null,"file":"b"}]}`, `duplicate key "file" in $.checkpoints[0]`},
		"score past float64": {`{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":1,"metric":"m","score":1e999}]}`, "score"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ManifestName), []byte(tc.body), 0o644)
		_, err := ReadManifest(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", name, err, tc.want)
		}
	}
}

// FuzzReadSigned is FuzzRead past the header digest: an input whose header starts with the
// digest entry is signed first, so that mutations reach the JSON, the record and the bounds
// checks instead of stopping at the checksum. What Read accepts, Info accepts alike.
func FuzzReadSigned(f *testing.F) {
	f.Add(encodeBytes(f, sampleRecord()))
	f.Add(encodeBytes(f, &Record{}))
	f.Add(signed(`{"__metadata__":{"nitro.format":"2","nitro.record":"{\"format\":2,`+minRecord+`}"}}`, nil))
	f.Add(deepRecord(9000)) // nested past the depth limit: refused by one pass, in milliseconds
	f.Add(deepRecord(200_000))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 8 {
			n := binary.LittleEndian.Uint64(b)
			if n <= uint64(len(b)-8) && n >= uint64(len(digestPrefix)+64+1) && bytes.HasPrefix(b[8:], []byte(digestPrefix)) {
				b = bytes.Clone(b)
				sign(b[8 : 8+n])
			}
		}
		r, err := decode("fuzz", bytes.NewReader(b), int64(len(b)))
		h, herr := decodeInfo("fuzz", bytes.NewReader(b), int64(len(b)))
		var fe *FormatError
		if err != nil {
			if !errors.As(err, &fe) || fe.File != "fuzz" {
				t.Fatalf("error %v is not a *FormatError naming the file", err)
			}
			return
		}
		if herr != nil || h.Epoch != r.Epoch || h.Step != r.Step || len(h.Tensors) != len(r.Tensors) {
			t.Fatalf("Read accepted what Info refused: %v", herr)
		}
		if f, msg := outOfBounds(r.Epoch, r.Step, r.Position); f != "" {
			t.Fatalf("accepted a record with %s %s", f, msg)
		}
	})
}
