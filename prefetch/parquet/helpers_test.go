package parquet_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/parquet"
	pq "github.com/parquet-go/parquet-go"
)

// sample is one test row: every column derives from ID, so any batch row says which sample it
// came from.
type sample struct {
	ID    int64     `parquet:"id"`
	X     []float32 `parquet:"x,list"`                              // [id, -id, id/2]
	Img   []int32   `parquet:"img,list" parquet-element:",uint(8)"` // (id+k) % 256, k < 4
	Flag  bool      `parquet:"flag"`                                // id is odd
	Name  string    `parquet:"name"`                                // not a number
	Opt   *int64    `parquet:"opt,optional"`                        // null for multiples of 5
	Small int32     `parquet:"small,int(16)"`                       // -id
	Grid  [][]int32 `parquet:"grid,list"`                           // a list of lists
	Big   uint64    `parquet:"big,uint(64)"`                        // 1<<63 + id
}

func makeSample(id int) sample {
	s := sample{
		ID:    int64(id),
		X:     []float32{float32(id), -float32(id), float32(id) / 2},
		Img:   []int32{int32((id) % 256), int32((id + 1) % 256), int32((id + 2) % 256), int32((id + 3) % 256)},
		Flag:  id%2 == 1,
		Name:  "s",
		Small: int32(-id),
		Grid:  [][]int32{{1}},
		Big:   1<<63 + uint64(id),
	}
	if id%5 != 0 {
		v := int64(id)
		s.Opt = &v
	}
	return s
}

func samples(lo, hi int) []sample {
	out := make([]sample, 0, hi-lo)
	for id := lo; id < hi; id++ {
		out = append(out, makeSample(id))
	}
	return out
}

// writeFile writes rows to path in row groups of at most perGroup rows.
func writeFile[T any](t testing.TB, path string, rows []T, perGroup int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pq.NewGenericWriter[T](f, pq.MaxRowsPerRowGroup(int64(perGroup)))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// testFile writes samples 0..n in groups of perGroup rows and returns its path.
func testFile(t testing.TB, n, perGroup int) string {
	t.Helper()
	path := t.TempDir() + "/data.parquet"
	writeFile(t, path, samples(0, n), perGroup)
	return path
}

// fields is the usual mapping: id, x [3] and img [2, 2].
func fields() map[string]parquet.Field {
	return map[string]parquet.Field{
		"id":  {DType: "Int64"},
		"x":   {DType: "Float32", Shape: []int{3}},
		"img": {Column: "img", DType: "Uint8", Shape: []int{2, 2}},
	}
}

func open(t testing.TB, path string, cfg parquet.Config) *parquet.Source {
	t.Helper()
	s, err := parquet.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ids reads batch i and returns its ids, checking every field of every row against its id.
func ids(t testing.TB, s prefetch.Source, i int) []int64 {
	t.Helper()
	b, err := s.BatchAt(i)
	if err != nil {
		t.Fatalf("BatchAt(%d): %v", i, err)
	}
	return checkBatch(t, b)
}

func checkBatch(t testing.TB, b prefetch.Batch) []int64 {
	t.Helper()
	id := tensors.MustCopyFlatData[int64](b["id"])
	if x, ok := b["x"]; ok {
		xs := tensors.MustCopyFlatData[float32](x)
		if d := x.Shape().Dimensions; len(d) != 2 || d[0] != len(id) || d[1] != 3 {
			t.Fatalf("x has shape %v", d)
		}
		for r, v := range id {
			if xs[3*r] != float32(v) || xs[3*r+1] != -float32(v) || xs[3*r+2] != float32(v)/2 {
				t.Fatalf("row %d (id %d): x = %v", r, v, xs[3*r:3*r+3])
			}
		}
	}
	if img, ok := b["img"]; ok {
		px := tensors.MustCopyFlatData[uint8](img)
		if d := img.Shape().Dimensions; len(d) != 3 || d[0] != len(id) || d[1] != 2 || d[2] != 2 {
			t.Fatalf("img has shape %v", d)
		}
		for r, v := range id {
			for k := range 4 {
				if px[4*r+k] != uint8((v+int64(k))%256) {
					t.Fatalf("row %d (id %d): img = %v", r, v, px[4*r:4*r+4])
				}
			}
		}
	}
	return id
}

func wantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q lacks %q", err, p)
		}
	}
}

func seq(lo, hi int) []int64 {
	out := make([]int64, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, int64(i))
	}
	return out
}
