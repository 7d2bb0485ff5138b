package diskcache

import (
	"strings"
	"testing"
)

// FuzzDecodeEntry: any bytes under an entry's name are refused with an error or decoded whole,
// never a panic; what decodes holds the key asked for and an executable inside the bytes read.
func FuzzDecodeEntry(f *testing.F) {
	key := strings.Repeat("c", 64)
	good, err := encodeEntry(Meta{Key: key, Program: "g"}, []byte("executable bytes"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(magic))
	f.Add([]byte(magic + "\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, exe, err := decodeEntry(data, key)
		if err != nil {
			return
		}
		if m.Key != key || len(exe) >= len(data) {
			t.Fatalf("decoded key %q and %d executable bytes from %d bytes", m.Key, len(exe), len(data))
		}
	})
}
