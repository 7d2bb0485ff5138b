package text

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// randomText is n printable bytes drawn from seed: long enough windows of it are unique, so a
// window says where it came from.
func randomText(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(' ' + r.IntN(95))
	}
	return b
}

// writeTree writes files (relative path -> contents) under a new folder and returns it.
func writeTree(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// randomTree is a folder of n files of random text, 300 to 2300 bytes each.
func randomTree(t testing.TB, n int) (string, map[string][]byte) {
	files := map[string][]byte{}
	for k := range n {
		files[fmt.Sprintf("d%d/f%03d.txt", k%3, k)] = randomText(uint64(k), 300+(k*37)%2000)
	}
	return writeTree(t, files), files
}

// rows is a batch's windows as bytes: tokens, then the last target, Context+1 bytes each, after
// checking that every target is the next token.
func rows(t testing.TB, b prefetch.Batch) [][]byte {
	t.Helper()
	tok, tgt := b[Tokens], b[Targets]
	if tok == nil || tgt == nil || len(b) != 2 {
		t.Fatalf("batch fields %v: want %q and %q", keys(b), Tokens, Targets)
	}
	dims := tok.Shape().Dimensions
	if len(dims) != 2 || tok.DType().String() != "Int32" || fmt.Sprint(tgt.Shape().Dimensions) != fmt.Sprint(dims) || tgt.DType() != tok.DType() {
		t.Fatalf("tokens %s, targets %s: want two int32 [batch, context]", tok.Shape(), tgt.Shape())
	}
	ctx := dims[1]
	x, y := tensors.MustCopyFlatData[int32](tok), tensors.MustCopyFlatData[int32](tgt)
	var out [][]byte
	for r := range dims[0] {
		w := make([]byte, ctx+1)
		for k := range ctx {
			if x[r*ctx+k] < 0 || x[r*ctx+k] >= Vocab || y[r*ctx+k] < 0 || y[r*ctx+k] >= Vocab {
				t.Fatalf("row %d: value out of the byte range", r)
			}
			w[k] = byte(x[r*ctx+k])
			if k > 0 && y[r*ctx+k-1] != x[r*ctx+k] {
				t.Fatalf("row %d: targets[%d] = %d, tokens[%d] = %d: targets must be tokens shifted by one", r, k-1, y[r*ctx+k-1], k, x[r*ctx+k])
			}
		}
		w[ctx] = byte(y[r*ctx+ctx-1])
		out = append(out, w)
	}
	return out
}

func keys(b prefetch.Batch) []string {
	var out []string
	for k := range b {
		out = append(out, k)
	}
	return out
}

// allRows is every window of the source's current epoch.
func allRows(t testing.TB, s prefetch.Source) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range s.Len() {
		b, err := s.BatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows(t, b)...)
	}
	return out
}

// findIn names the file that holds w, or "".
func findIn(w []byte, files map[string][]byte) string {
	for name, b := range files {
		if bytes.Contains(b, w) {
			return name
		}
	}
	return ""
}

func mustSplit(t testing.TB, cfg Config) prefetch.Data {
	t.Helper()
	data, err := Split(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := CloseAll(data); err != nil {
			t.Error(err)
		}
	})
	return data
}

// splitFails asserts that Split refuses cfg with an error saying every one of want.
func splitFails(t testing.TB, cfg Config, want ...string) {
	t.Helper()
	data, err := Split(cfg)
	if err == nil {
		CloseAll(data)
		t.Errorf("%+v: no error, want one saying %q", cfg, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%+v: error %q does not say %q", cfg, err, w)
		}
	}
}
