package text

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/prefetch"
	pq "github.com/parquet-go/parquet-go"
)

// doc is one row of a test Parquet file.
type docRow struct {
	Text string   `parquet:"text"`
	N    int32    `parquet:"n"`
	Opt  *string  `parquet:"opt,optional"`
	Tags []string `parquet:"tags,list"`
}

// writeRows writes rows to path, 7 rows per row group.
func writeRows(t testing.TB, path string, rows []docRow) {
	t.Helper()
	if err := pq.WriteFile(path, rows, pq.MaxRowsPerRowGroup(7)); err != nil {
		t.Fatal(err)
	}
}

// parquetCorpus writes two files of rows of random text (every fifth empty, and opt null on
// odd rows) and returns the folder and the rows' texts.
func parquetCorpus(t testing.TB) (string, []string) {
	dir := t.TempDir()
	var texts []string
	for k, name := range []string{"a.parquet", "b.parquet"} {
		var rows []docRow
		for i := range 40 {
			text := string(randomText(uint64(100*k+i), 50+(i*53)%400))
			if i%5 == 4 {
				text = ""
			}
			r := docRow{Text: text, N: int32(i), Tags: []string{"x"}}
			if i%2 == 0 {
				r.Opt = &text
			}
			rows = append(rows, r)
		}
		writeRows(t, filepath.Join(dir, name), rows)
		for _, r := range rows {
			texts = append(texts, r.Text)
		}
	}
	return dir, texts
}

func TestParquetColumn(t *testing.T) {
	dir, texts := parquetCorpus(t)
	spillDir := t.TempDir()
	for _, column := range []string{"text", "opt"} {
		data := mustSplit(t, Config{Path: dir, Column: column, Context: 64, BatchSize: 8, Val: 0.3, Seed: 5, TempDir: spillDir})
		// The streams the splits should serve: each split's non-empty rows, in file and row
		// order, each followed by a NUL.
		var train, val bytes.Buffer
		for i, text := range texts {
			if text == "" || (column == "opt" && i%2 == 1) {
				continue
			}
			b := &train
			if heldOut([]byte(text), 0.3) {
				b = &val
			}
			b.WriteString(text)
			b.WriteByte(0)
		}
		if train.Len() == 0 || val.Len() == 0 {
			t.Fatal("the test corpus split badly")
		}
		for split, stream := range map[string][]byte{"train": train.Bytes(), "val": val.Bytes()} {
			src := data[split].(*Source)
			if src.Bytes() != int64(len(stream)) {
				t.Errorf("%s %s: %d bytes, want %d", column, split, src.Bytes(), len(stream))
			}
			for _, w := range allRows(t, src) {
				if !bytes.Contains(stream, w) {
					t.Fatalf("%s %s: window %q is not in the split's rows", column, split, w)
				}
			}
			if err := prefetch.CheckBatchAt(src, true); err != nil {
				t.Error(err)
			}
		}
		if unlinkOpen {
			if left, _ := os.ReadDir(spillDir); len(left) != 0 {
				t.Errorf("spill files left in TempDir while open: %v", left)
			}
		}
		if err := CloseAll(data); err != nil {
			t.Fatal(err)
		}
	}
	if left, _ := os.ReadDir(spillDir); len(left) != 0 {
		t.Errorf("spill files left in TempDir after Close: %v", left)
	}
	// One file, no val.
	src, err := Open(Config{Path: filepath.Join(dir, "a.parquet"), Column: "text", Context: 16, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := prefetch.CheckBatchAt(src, true); err != nil {
		t.Error(err)
	}
	src.Close()
}

func TestParquetBadInput(t *testing.T) {
	dir, _ := parquetCorpus(t)
	notPq := writeTree(t, map[string][]byte{"x.parquet": []byte("PAR1 this is not parquet at all PAR1"), "y.txt": []byte("hello")})
	emptyRows := t.TempDir()
	writeRows(t, filepath.Join(emptyRows, "e.parquet"), []docRow{{Text: ""}, {Text: ""}})
	for _, c := range []struct {
		path, column string
		want         []string
	}{
		{dir, "n", []string{`Config.Column "n"`, "not strings", "INT"}},
		{dir, "nope", []string{`Config.Column "nope"`, "not found", "text, n, opt, tags"}},
		{dir, "tags", []string{`Config.Column "tags"`, "not a string column"}},
		{dir, "tags.list.element", []string{`Config.Column "tags.list.element"`, "repeated"}},
		{notPq, "text", []string{"x.parquet", "Parquet"}},
		{filepath.Join(notPq, "y.txt"), "text", []string{"y.txt", "Parquet"}},
		{t.TempDir(), "text", []string{"no file ending in .parquet", "Config.Column is set"}},
		{emptyRows, "text", []string{`Config.Column "text"`, "no text"}},
	} {
		splitFails(t, Config{Path: c.path, Column: c.column, Context: 8, BatchSize: 2, Val: 0.2}, c.want...)
	}
	// Truncated files, at every length, are errors, never panics.
	full, err := os.ReadFile(filepath.Join(dir, "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.parquet")
	for n := 0; n < len(full); n += max(1, len(full)/40) {
		if err := os.WriteFile(cut, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		if src, err := Open(Config{Path: cut, Column: "text", Context: 8, BatchSize: 2}); err == nil {
			src.Close()
			t.Errorf("%d of %d bytes opened", n, len(full))
		}
	}
}
