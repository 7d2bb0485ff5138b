package diskcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nitro-go/nitro/tensorfile"
)

// An entry file is, in order: the magic, the metadata's length (uint32, little-endian) and the
// metadata (JSON), the executable's length (uint64) and the executable, then a SHA-256 over all
// of that. The metadata repeats the key, so that a file renamed or copied under another key's
// name is refused as foreign rather than loaded for the wrong program.
const (
	magic       = "NITROXC1"
	maxMetaSize = 1 << 20
	sumSize     = sha256.Size
	// EntryExt ends every entry's file name; anything else in the folder is not an entry.
	EntryExt = ".nxc"
)

// Meta is what an entry says about itself: its key, the program's name and the digest of each
// key part, so that a miss can name the part that moved and `nitro cache ls` can show it.
type Meta struct {
	Key     string `json:"key"`
	Program string `json:"program"` // the module name in the program text, or ""
	Parts   Parts  `json:"parts"`
	// Signature digests the program's entry function header ("" in entries written before it
	// was recorded, or for a program without one): see signature.
	Signature string `json:"signature,omitempty"`
	Created   int64  `json:"created"` // unix seconds
}

// errCorrupt marks an entry that is present but cannot be trusted.
var errCorrupt = errors.New("corrupt entry")

func encodeEntry(m Meta, exe []byte) ([]byte, error) {
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(magic)
	binary.Write(&b, binary.LittleEndian, uint32(len(meta)))
	b.Write(meta)
	binary.Write(&b, binary.LittleEndian, uint64(len(exe)))
	b.Write(exe)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// decodeEntry checks an entry's bytes whole (length, checksum, and that it holds key when key is
// not empty) and returns its metadata and executable. Every refusal wraps errCorrupt.
func decodeEntry(data []byte, key string) (Meta, []byte, error) {
	m, metaEnd, err := decodeMeta(data)
	if err != nil {
		return Meta{}, nil, err
	}
	rest := data[metaEnd:]
	if len(rest) < 8 {
		return Meta{}, nil, fmt.Errorf("%w: truncated before the executable's length", errCorrupt)
	}
	n := binary.LittleEndian.Uint64(rest)
	if uint64(len(rest)-8) < uint64(sumSize) || n != uint64(len(rest)-8-sumSize) {
		return Meta{}, nil, fmt.Errorf("%w: truncated or padded: the executable's length says %d bytes, the file holds %d after it", errCorrupt, n, len(rest)-8)
	}
	body := data[:len(data)-sumSize]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[len(data)-sumSize:]) {
		return Meta{}, nil, fmt.Errorf("%w: checksum mismatch (the bytes changed after they were written)", errCorrupt)
	}
	if key != "" && m.Key != key {
		return Meta{}, nil, fmt.Errorf("%w: foreign entry: it holds key %.12s, its file name says %.12s", errCorrupt, m.Key, key)
	}
	return m, rest[8 : 8+n], nil
}

// decodeMeta reads the magic and metadata only (what ls and a miss explanation need).
func decodeMeta(data []byte) (Meta, int, error) {
	if len(data) < len(magic)+4 || string(data[:len(magic)]) != magic {
		return Meta{}, 0, fmt.Errorf("%w: not a nitro compile cache entry (no %q header)", errCorrupt, magic)
	}
	n := binary.LittleEndian.Uint32(data[len(magic):])
	start := len(magic) + 4
	if n > maxMetaSize || uint64(len(data)-start) < uint64(n) {
		return Meta{}, 0, fmt.Errorf("%w: truncated metadata (%d bytes declared)", errCorrupt, n)
	}
	var m Meta
	if err := json.Unmarshal(data[start:start+int(n)], &m); err != nil {
		return Meta{}, 0, fmt.Errorf("%w: metadata: %v", errCorrupt, err)
	}
	return m, start + int(n), nil
}

// ReadEntry reads and checks an entry file whole (tools and tests; the cache reads its own).
func ReadEntry(path string) (Meta, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Meta{}, nil, err
	}
	return decodeEntry(data, "")
}

// WriteEntry writes an entry file durably, checksummed (tools and tests).
func WriteEntry(path string, m Meta, exe []byte) error {
	data, err := encodeEntry(m, exe)
	if err != nil {
		return err
	}
	return tensorfile.WriteFile(path, data, 0o644)
}
