package parquet_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/parquet"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

func TestBatchAtReadsBatchIOfTheFile(t *testing.T) {
	path := testFile(t, 23, 7)
	s := open(t, path, parquet.Config{Fields: fields(), BatchSize: 5})
	if s.Len() != 5 || s.Samples() != 23 || s.DropsPartial() || s.RowGroups() != 4 {
		t.Fatalf("Len %d Samples %d DropsPartial %v RowGroups %d", s.Len(), s.Samples(), s.DropsPartial(), s.RowGroups())
	}
	for i := range s.Len() {
		if got, want := ids(t, s, i), seq(5*i, min(5*i+5, 23)); !slices.Equal(got, want) {
			t.Fatalf("batch %d: ids %v, want %v", i, got, want)
		}
	}
	b, err := s.BatchAt(0)
	if err != nil {
		t.Fatal(err)
	}
	for name, dt := range map[string]dtypes.DType{"id": dtypes.Int64, "x": dtypes.Float32, "img": dtypes.Uint8} {
		if b[name].DType() != dt {
			t.Fatalf("field %q has dtype %s, want %s", name, b[name].DType(), dt)
		}
	}
	for _, i := range []int{-1, 5} {
		if _, err := s.BatchAt(i); err == nil {
			t.Fatalf("BatchAt(%d) of 5 batches did not fail", i)
		}
	}
	d := open(t, path, parquet.Config{Fields: fields(), BatchSize: 5, DropPartial: true})
	if d.Len() != 4 || !d.DropsPartial() {
		t.Fatalf("DropPartial: Len %d", d.Len())
	}
	if err := prefetch.CheckBatchAt(s, true); err != nil {
		t.Fatal(err)
	}
	if err := prefetch.CheckBatchAt(d, true); err != nil {
		t.Fatal(err)
	}
}

func TestBatchesAreFreshTensors(t *testing.T) {
	s := open(t, testFile(t, 10, 10), parquet.Config{Fields: fields(), BatchSize: 4})
	b, _ := s.BatchAt(0)
	tensors.MustMutableFlatData[int64](b["id"], func(x []int64) { x[0] = 99 })
	if got := ids(t, s, 0); got[0] != 0 {
		t.Fatalf("writing a served batch reached the source: ids %v", got)
	}
}

func TestDirectoryIsOneDatasetInNameOrder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.parquet"), samples(10, 17), 3)
	writeFile(t, filepath.Join(dir, "a.parquet"), samples(0, 10), 4)
	writeFile(t, filepath.Join(dir, "c.parquet"), samples(17, 20), 10)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, parquet.Config{Fields: fields(), BatchSize: 6})
	if s.Samples() != 20 || len(s.Files()) != 3 || filepath.Base(s.Files()[0]) != "a.parquet" || s.RowGroups() != 3+3+1 {
		t.Fatalf("Samples %d Files %v RowGroups %d", s.Samples(), s.Files(), s.RowGroups())
	}
	var all []int64
	for i := range s.Len() {
		all = append(all, ids(t, s, i)...)
	}
	if !slices.Equal(all, seq(0, 20)) {
		t.Fatalf("ids %v", all)
	}
	if err := prefetch.CheckBatchAt(s, true); err != nil {
		t.Fatal(err)
	}
	// A file of the directory that lacks a column is named.
	type other struct {
		ID int64 `parquet:"id"`
	}
	writeFile(t, filepath.Join(dir, "d.parquet"), []other{{1}}, 1)
	_, err := parquet.Open(dir, parquet.Config{Fields: fields(), BatchSize: 6})
	wantErr(t, err, "d.parquet", `column "img"`, "not found", "columns id")
}

// TestShuffleServesWhatArrayBatchesServes: the same samples in the same order, shuffled from
// the same seed, make the same batches in every epoch; so does a Rows view against the
// ArrayBatches of those rows.
func TestShuffleServesWhatArrayBatchesServes(t *testing.T) {
	const n = 57
	path := testFile(t, n, 8)
	rows := rand.New(rand.NewPCG(1, 2)).Perm(n)[:40]
	for _, view := range [][]int{nil, rows} {
		ref := make([]int64, 0, n)
		if view == nil {
			ref = seq(0, n)
		} else {
			for _, r := range view {
				ref = append(ref, int64(r))
			}
		}
		arr, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"id": tensors.FromFlatDataAndDimensions(ref, len(ref))}, 6,
			prefetch.ArrayOptions{Shuffle: true, Seed: 42, DropPartial: true})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, path, parquet.Config{Fields: fields(), BatchSize: 6, Shuffle: true, Seed: 42, DropPartial: true, Rows: view, CacheRowGroups: 8})
		if s.Len() != arr.Len() {
			t.Fatalf("Len %d, ArrayBatches %d", s.Len(), arr.Len())
		}
		for ep := range 3 {
			if err := s.BeginEpoch(ep); err != nil {
				t.Fatal(err)
			}
			if err := arr.BeginEpoch(ep); err != nil {
				t.Fatal(err)
			}
			seen := map[int64]bool{}
			for i := range s.Len() {
				got := ids(t, s, i)
				want := tensors.MustCopyFlatData[int64](mustBatch(t, arr, i)["id"])
				if !slices.Equal(got, want) {
					t.Fatalf("view %v epoch %d batch %d: ids %v, ArrayBatches %v", view != nil, ep, i, got, want)
				}
				for _, id := range got {
					seen[int64(id)] = true
				}
			}
			if len(seen) != s.Len()*6 {
				t.Fatalf("epoch %d served %d distinct samples", ep, len(seen))
			}
			if err := prefetch.CheckBatchAt(s, true); err != nil {
				t.Fatalf("epoch %d: %v", ep, err)
			}
		}
	}
}

func mustBatch(t testing.TB, s prefetch.Source, i int) prefetch.Batch {
	t.Helper()
	b, err := s.BatchAt(i)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRowsView(t *testing.T) {
	path := testFile(t, 30, 7)
	s := open(t, path, parquet.Config{Fields: fields(), BatchSize: 4, Rows: []int{29, 0, 7, 7, 12}})
	if s.Samples() != 5 || s.Len() != 2 {
		t.Fatalf("Samples %d Len %d", s.Samples(), s.Len())
	}
	if got := append(ids(t, s, 0), ids(t, s, 1)...); !slices.Equal(got, []int64{29, 0, 7, 7, 12}) {
		t.Fatalf("ids %v", got)
	}
	_, err := parquet.Open(path, parquet.Config{Fields: fields(), BatchSize: 4, Rows: []int{3, 30}})
	wantErr(t, err, "Config.Rows[1] = 30", "[0, 30)")
	_, err = parquet.Open(path, parquet.Config{Fields: fields(), BatchSize: 4, Rows: []int{}})
	wantErr(t, err, "Rows is empty")
}

func TestReadsOnlyTheRowGroupsABatchNeeds(t *testing.T) {
	path := testFile(t, 100, 10) // ten groups of ten rows
	s := open(t, path, parquet.Config{Fields: fields(), BatchSize: 10, CacheRowGroups: 2})
	if _, _, held := s.CacheStats(); held != 0 {
		t.Fatalf("Open decoded %d row groups", held)
	}
	ids(t, s, 3)
	if hits, decodes, held := s.CacheStats(); decodes != 1 || hits != 0 || held != 1 {
		t.Fatalf("batch 3 (group 3): %d hits, %d decodes, %d held; want 0, 1, 1", hits, decodes, held)
	}
	ids(t, s, 3)
	if hits, decodes, _ := s.CacheStats(); decodes != 1 || hits != 1 {
		t.Fatalf("batch 3 again: %d hits, %d decodes; want a hit", hits, decodes)
	}
	// A batch straddling two groups decodes both.
	st := open(t, path, parquet.Config{Fields: fields(), BatchSize: 15, CacheRowGroups: 2})
	ids(t, st, 1) // rows 15..30: groups 1 and 2
	if _, decodes, held := st.CacheStats(); decodes != 2 || held != 2 {
		t.Fatalf("rows 15..30: %d decodes, %d held; want 2, 2", decodes, held)
	}
	// The cache is bounded: a whole epoch through a cache of 2 holds 2 groups.
	for i := range s.Len() {
		ids(t, s, i)
	}
	if _, decodes, held := s.CacheStats(); held != 2 || decodes != 11 {
		t.Fatalf("after an epoch: %d decodes, %d held; want 11 (group 3 was evicted before its turn), 2", decodes, held)
	}
	ids(t, s, 0) // evicted long ago: decoded again
	if _, decodes, _ := s.CacheStats(); decodes != 12 {
		t.Fatalf("an evicted group: %d decodes, want 12", decodes)
	}
}

// TestConcurrentBatchAt runs 4 goroutines over shuffled epochs, each reading every batch in its
// own order: with a cache too small for the groups (evictions under way), and with one large
// enough, where each group is decoded once however many goroutines want it at the same time.
// Run it with -race.
func TestConcurrentBatchAt(t *testing.T) {
	path := testFile(t, 200, 16)
	for _, cacheGroups := range []int{3, 16} {
		s := open(t, path, parquet.Config{Fields: fields(), BatchSize: 8, Shuffle: true, Seed: 5, CacheRowGroups: cacheGroups})
		for ep := range 2 {
			if err := s.BeginEpoch(ep); err != nil {
				t.Fatal(err)
			}
			// The plan, computed here: the permutation Config.Shuffle documents.
			perm := rand.New(rand.NewPCG(5, uint64(ep))).Perm(200)
			want := make([][]int64, s.Len())
			for i := range want {
				for _, r := range perm[8*i : 8*i+8] {
					want[i] = append(want[i], int64(r))
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					order := rand.New(rand.NewPCG(uint64(g), uint64(ep))).Perm(s.Len())
					for _, i := range order {
						b, err := s.BatchAt(i)
						if err != nil {
							errs <- err
							return
						}
						if got := tensors.MustCopyFlatData[int64](b["id"]); !slices.Equal(got, want[i]) {
							errs <- fmt.Errorf("goroutine %d batch %d: ids %v, want %v", g, i, got, want[i])
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("cache %d epoch %d: %v", cacheGroups, ep, err)
			}
		}
		if _, decodes, held := s.CacheStats(); held > cacheGroups || (cacheGroups == 16 && decodes != 13) {
			t.Fatalf("cache %d: %d decodes, %d held", cacheGroups, decodes, held)
		}
	}
}

func TestConversions(t *testing.T) {
	path := testFile(t, 300, 100)
	cases := []struct {
		field parquet.Field
		check func(*tensors.Tensor) bool
	}{
		{parquet.Field{Column: "id", DType: "Int32"}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[int32](x)[2] == 2 }},
		{parquet.Field{Column: "id", DType: "Float64"}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[float64](x)[2] == 2 }},
		{parquet.Field{Column: "x", DType: "Float64", Shape: []int{3}}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[float64](x)[5] == 0.5 }},
		{parquet.Field{Column: "img", DType: "Float32", Shape: []int{4}}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[float32](x)[5] == 2 }},
		{parquet.Field{Column: "img", DType: "Int8", Shape: []int{4}}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[int8](x)[5] == 2 }},
		{parquet.Field{Column: "flag", DType: "Bool"}, func(x *tensors.Tensor) bool {
			f := tensors.MustCopyFlatData[bool](x)
			return !f[0] && f[1] && !f[2]
		}},
		{parquet.Field{Column: "small", DType: "Int64"}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[int64](x)[3] == -3 }},
		{parquet.Field{Column: "small", DType: "Int16"}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[int16](x)[3] == -3 }},
		{parquet.Field{Column: "big", DType: "Uint64"}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[uint64](x)[3] == 1<<63+3 }},
		{parquet.Field{Column: "big", DType: "Float64"}, func(x *tensors.Tensor) bool { return tensors.MustCopyFlatData[float64](x)[0] == 1<<63 }},
	}
	for _, c := range cases {
		s := open(t, path, parquet.Config{Fields: map[string]parquet.Field{"v": c.field}, BatchSize: 4})
		b := mustBatch(t, s, 0)
		if b["v"].DType().String() != c.field.DType || !c.check(b["v"]) {
			t.Errorf("%+v: got %v", c.field, b["v"])
		}
	}
	// Narrowing is checked value by value, naming the file, group, column and row.
	for _, c := range []struct {
		field parquet.Field
		row   string
	}{
		{parquet.Field{Column: "id", DType: "Uint8"}, "row 256: value 256 does not fit DType Uint8"},
		{parquet.Field{Column: "small", DType: "Uint16"}, "row 1: value -1 does not fit DType Uint16"},
		{parquet.Field{Column: "img", DType: "Int8", Shape: []int{4}}, "row 125: value 128 does not fit DType Int8"},
		{parquet.Field{Column: "big", DType: "Int64"}, "row 0: value 9223372036854775808 does not fit DType Int64"},
	} {
		s := open(t, path, parquet.Config{Fields: map[string]parquet.Field{"v": c.field}, BatchSize: 300})
		_, err := s.BatchAt(0)
		wantErr(t, err, path, "column "+fmt.Sprintf("%q", c.field.Column), c.row)
	}
}

func TestOpenChecksTheSchema(t *testing.T) {
	path := testFile(t, 10, 10)
	cases := []struct {
		name   string
		fields map[string]parquet.Field
		want   []string
	}{
		{"missing", map[string]parquet.Field{"y": {DType: "Float32"}}, []string{path, `column "y"`, "not found", "columns id, x, img"}},
		{"string", map[string]parquet.Field{"n": {Column: "name", DType: "Int32"}}, []string{path, `column "name"`, "STRING", "numeric"}},
		{"float to int", map[string]parquet.Field{"x": {DType: "Int32", Shape: []int{3}}}, []string{path, `column "x"`, "FLOAT", "does not convert to DType Int32"}},
		{"bool to float", map[string]parquet.Field{"f": {Column: "flag", DType: "Float32"}}, []string{`column "flag"`, "does not convert to DType Float32"}},
		{"int to bool", map[string]parquet.Field{"id": {DType: "Bool"}}, []string{`column "id"`, "does not convert to DType Bool"}},
		{"list as scalar", map[string]parquet.Field{"x": {DType: "Float32"}}, []string{`column "x"`, "is a list", "no Shape"}},
		{"scalar as list", map[string]parquet.Field{"id": {DType: "Int64", Shape: []int{1}}}, []string{`column "id"`, "one value per row", "Shape [1]"}},
		{"list of lists", map[string]parquet.Field{"g": {Column: "grid", DType: "Int32", Shape: []int{1}}}, []string{`column "grid"`, "list"}},
		{"nested path", map[string]parquet.Field{"e": {Column: "x.nope", DType: "Float32"}}, []string{`column "x.nope"`, `group "x"`}},
		{"bad dtype", map[string]parquet.Field{"x": {DType: "float33", Shape: []int{3}}}, []string{`field "x"`, `DType "float33"`, "Float32"}},
		{"bad shape", map[string]parquet.Field{"x": {DType: "Float32", Shape: []int{3, 0}}}, []string{`field "x"`, "Shape [3 0]", "positive"}},
		{"no fields", nil, []string{"no Fields"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parquet.Open(path, parquet.Config{Fields: c.fields, BatchSize: 2})
			wantErr(t, err, c.want...)
		})
	}
	_, err := parquet.Open(path, parquet.Config{Fields: fields()})
	wantErr(t, err, "BatchSize 0")
	_, err = parquet.Open(path, parquet.Config{Fields: fields(), BatchSize: 2, CacheRowGroups: -1})
	wantErr(t, err, "CacheRowGroups -1")
	_, err = parquet.Open(path, parquet.Config{Fields: fields(), BatchSize: 11, DropPartial: true})
	wantErr(t, err, "10 samples make no batch of BatchSize 11")
	_, err = parquet.Open(filepath.Join(t.TempDir(), "none.parquet"), parquet.Config{Fields: fields(), BatchSize: 2})
	wantErr(t, err, "none.parquet")
	_, err = parquet.Open(t.TempDir(), parquet.Config{Fields: fields(), BatchSize: 2})
	wantErr(t, err, "holds no *.parquet file")
	// The dotted path of a list's leaf reads it too.
	s := open(t, path, parquet.Config{Fields: map[string]parquet.Field{"x": {Column: "x.list.element", DType: "Float32", Shape: []int{3}}}, BatchSize: 2})
	if got := tensors.MustCopyFlatData[float32](mustBatch(t, s, 1)["x"]); got[0] != 2 {
		t.Fatalf("x.list.element: %v", got)
	}
}

func TestRowsThatDoNotFitTheFieldAreErrors(t *testing.T) {
	path := testFile(t, 12, 6)
	s := open(t, path, parquet.Config{Fields: map[string]parquet.Field{"x": {DType: "Float32", Shape: []int{4}}}, BatchSize: 3})
	_, err := s.BatchAt(0)
	wantErr(t, err, path, "row group 0", `column "x"`, "row 0: 3 values, Shape [4] needs 4")
	s = open(t, path, parquet.Config{Fields: map[string]parquet.Field{"x": {DType: "Float32", Shape: []int{2}}}, BatchSize: 3})
	_, err = s.BatchAt(0)
	wantErr(t, err, "row 0: more than the 2 values Shape [2] needs")
	s = open(t, path, parquet.Config{Fields: map[string]parquet.Field{"o": {Column: "opt", DType: "Int64"}}, BatchSize: 3})
	_, err = s.BatchAt(3) // rows 9..12 of group 1: row 10 is null
	wantErr(t, err, "row group 1", `column "opt"`, "row 10: a null")
	// Lists of another length, and empty lists.
	type ragged struct {
		V []float32 `parquet:"v,list"`
	}
	rp := filepath.Join(t.TempDir(), "ragged.parquet")
	writeFile(t, rp, []ragged{{[]float32{1, 2}}, {[]float32{3, 4}}, {nil}}, 10)
	s = open(t, rp, parquet.Config{Fields: map[string]parquet.Field{"v": {DType: "Float32", Shape: []int{2}}}, BatchSize: 3})
	_, err = s.BatchAt(0)
	wantErr(t, err, "row 2: a null or empty list")
}

// TestEncodingsAndLayouts reads what other writers produce: dictionary-encoded and
// delta-encoded columns, snappy pages, version-1 data pages, optional columns without nulls, a
// bare repeated column, and a nested column by dotted path.
func TestEncodingsAndLayouts(t *testing.T) {
	type inner struct {
		V int32 `parquet:"v"`
	}
	type row struct {
		D   int64     `parquet:"d,dict"`
		Del int64     `parquet:"del,delta"`
		L   []float32 `parquet:"l,list" parquet-element:",dict"`
		O   *float64  `parquet:"o,optional"`
		R   []int32   `parquet:"r"` // a bare repeated column
		N   inner     `parquet:"n"`
	}
	rows := make([]row, 40)
	for i := range rows {
		o := float64(i) / 4
		rows[i] = row{D: int64(i % 3), Del: int64(1000 + i), L: []float32{float32(i % 2), 1}, O: &o, R: []int32{int32(i), int32(-i)}, N: inner{int32(7 * i)}}
	}
	cfg := parquet.Config{Fields: map[string]parquet.Field{
		"d": {DType: "Int64"}, "del": {DType: "Int32"}, "l": {DType: "Float32", Shape: []int{2}},
		"o": {DType: "Float32"}, "r": {DType: "Int32", Shape: []int{2}}, "n": {Column: "n.v", DType: "Int64"},
	}, BatchSize: 40}
	for _, opts := range [][]pq.WriterOption{
		{pq.Compression(&snappy.Codec{}), pq.MaxRowsPerRowGroup(16)},
		{pq.DataPageVersion(1), pq.PageBufferSize(64), pq.MaxRowsPerRowGroup(32)},
	} {
		path := filepath.Join(t.TempDir(), "enc.parquet")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := pq.NewGenericWriter[row](f, opts...)
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		s := open(t, path, cfg)
		b := mustBatch(t, s, 0)
		d := tensors.MustCopyFlatData[int64](b["d"])
		del := tensors.MustCopyFlatData[int32](b["del"])
		l := tensors.MustCopyFlatData[float32](b["l"])
		o := tensors.MustCopyFlatData[float32](b["o"])
		r := tensors.MustCopyFlatData[int32](b["r"])
		n := tensors.MustCopyFlatData[int64](b["n"])
		for i := range rows {
			if d[i] != int64(i%3) || del[i] != int32(1000+i) || l[2*i] != float32(i%2) || l[2*i+1] != 1 || o[i] != float32(i)/4 ||
				r[2*i] != int32(i) || r[2*i+1] != int32(-i) || n[i] != int64(7*i) {
				t.Fatalf("row %d: d %d del %d l %v o %v r %v n %d", i, d[i], del[i], l[2*i:2*i+2], o[i], r[2*i:2*i+2], n[i])
			}
		}
		if err := prefetch.CheckBatchAt(s, true); err != nil {
			t.Fatal(err)
		}
	}
}
