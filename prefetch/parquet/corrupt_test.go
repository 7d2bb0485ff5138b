package parquet_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/prefetch/parquet"
)

// readAll opens path and reads every batch, returning the batches' bytes by field, or the first
// error. A panic is returned as an error that says so.
func readAll(path string) (out map[string][]byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("PANIC: %v", r)
		}
	}()
	s, err := parquet.Open(path, parquet.Config{Fields: fields(), BatchSize: 7})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	out = map[string][]byte{}
	for i := range s.Len() {
		b, err := s.BatchAt(i)
		if err != nil {
			return nil, err
		}
		for name, t := range b {
			if err := t.ConstBytes(func(p []byte) { out[name] = append(out[name], p...) }); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// TestCorruptedFilesAreErrorsNotPanics: every single-byte corruption of a small file (and every
// truncation) either fails with an error or, where it hit bytes no value depends on (a statistic,
// the writer's name), reads the very same batches. Pages carry checksums, so a corrupted value
// cannot pass as another.
func TestCorruptedFilesAreErrorsNotPanics(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeFile(t, good, samples(0, 30), 11)
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	want, err := readAll(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.parquet")
	recovered := 0 // library panics turned into errors
	try := func(what string, data []byte) (failed bool) {
		t.Helper()
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(bad)
		if err != nil {
			if bytes.Contains([]byte(err.Error()), []byte("PANIC")) {
				t.Fatalf("%s: %v", what, err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(bad)) {
				t.Fatalf("%s: the error does not name the file: %v", what, err)
			}
			if bytes.Contains([]byte(err.Error()), []byte("corrupted?")) {
				recovered++
			}
			return true
		}
		for name, w := range want {
			if !bytes.Equal(got[name], w) {
				t.Fatalf("%s: field %q read other values without an error", what, name)
			}
		}
		return false
	}
	step := 5 // about 1,400 corruptions; every byte (step 1) passes too, in 5x the time
	if testing.Short() {
		step = 37
	}
	errs := 0
	for off := 0; off < len(orig); off += step {
		data := bytes.Clone(orig)
		data[off] ^= 0xa5
		if try(fmt.Sprintf("byte %d of %d flipped", off, len(orig)), data) {
			errs++
		}
	}
	for n := 0; n < len(orig); n += 1 + n/8 {
		if !try(fmt.Sprintf("truncated to %d of %d bytes", n, len(orig)), orig[:n]) {
			t.Fatalf("truncated to %d bytes: read without an error", n)
		}
	}
	t.Logf("%d of %d single-byte corruptions were errors (%d of them recovered library panics), the rest harmless",
		errs, (len(orig)+step-1)/step, recovered)

	// Plainly wrong files are refused before the library sees them.
	wantErr(t, func() error {
		_, err := readAll(writeBytes(t, dir, []byte("hello, I am not parquet at all")))
		return err
	}(), "not a Parquet file")
	huge := bytes.Clone(orig)
	binary.LittleEndian.PutUint32(huge[len(huge)-8:], 1<<31)
	wantErr(t, func() error { _, err := readAll(writeBytes(t, dir, huge)); return err }(), "footer length 2147483648 exceeds the file")
}

func writeBytes(t *testing.T, dir string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, "x.parquet")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAFailedDecodeIsNotCached: a row group that failed decodes again on the next call, so a
// transient read error does not stick; a closed source fails with an error.
func TestAFailedDecodeIsNotCached(t *testing.T) {
	path := testFile(t, 20, 10)
	s, err := parquet.Open(path, parquet.Config{Fields: fields(), BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err = s.BatchAt(0)
		wantErr(t, err, path, "row group 0")
	}
	if _, decodes, held := s.CacheStats(); decodes != 2 || held != 0 {
		t.Fatalf("%d decodes, %d held: a failure must not be cached", decodes, held)
	}
}
