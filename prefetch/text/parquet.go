package text

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	pq "github.com/parquet-go/parquet-go"
)

// spill is one split's rows being written to a temporary file.
type spill struct {
	f    *os.File
	w    *bufio.Writer
	rows int
	size int64
}

// loadParquet decodes cfg.Column of every Parquet file of cfg.Path once, into a temporary file
// per split (train, then val), each row's text followed by a NUL byte (the end-of-document
// token): windows cross rows, as an LM's packed documents do. Null and empty rows are skipped.
// A row goes to val by a hash of its text, so equal rows share a split.
func loadParquet(cfg Config) (_ *corpus, _ []part, err error) {
	files, _, err := walk(cfg.Path, []string{".parquet"}, "Config.Column is set, so Path is read as Parquet")
	if err != nil {
		return nil, nil, err
	}
	spills := make([]*spill, 1, 2)
	if cfg.Val > 0 {
		spills = spills[:2]
	}
	defer func() {
		if err != nil {
			for _, sp := range spills {
				if sp != nil {
					sp.f.Close()
					os.Remove(sp.f.Name())
				}
			}
		}
	}()
	for k := range spills {
		f, err := os.CreateTemp(cfg.TempDir, "nitro-text-*.spill")
		if err != nil {
			return nil, nil, fmt.Errorf("text: spilling the Parquet column (Config.TempDir %q): %w", cfg.TempDir, err)
		}
		spills[k] = &spill{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	}
	for _, p := range files {
		if err := readColumn(p.path, cfg, spills); err != nil {
			return nil, nil, err
		}
	}
	names := []string{"train", "val"}
	blobs := make([]blob, len(spills))
	parts := []part{{name: "train"}, {name: "val"}}
	for k, sp := range spills {
		if err := sp.w.Flush(); err != nil {
			return nil, nil, fmt.Errorf("text: spilling the Parquet column (Config.TempDir %q): %w", cfg.TempDir, err)
		}
		rel := fmt.Sprintf("column %q, %s rows (%d)", cfg.Column, names[k], sp.rows)
		blobs[k] = blob{path: sp.f.Name(), rel: rel, size: sp.size, f: sp.f}
		if sp.rows > 0 {
			parts[k].docs = []doc{{k, 0, sp.size}}
			parts[k].files = []string{rel}
		}
		if unlinkOpen {
			os.Remove(sp.f.Name()) // mapped from the open file; nothing is left behind
		}
	}
	rows := 0
	for _, sp := range spills {
		rows += sp.rows
	}
	for k := range parts {
		parts[k].of = fmt.Sprintf("the %d rows of Config.Column %q (split by a hash of each row's text)", rows, cfg.Column)
	}
	if rows == 0 {
		return nil, nil, fmt.Errorf("text: Config.Column %q of %s holds no text (every row null or empty): the corpus is empty", cfg.Column, cfg.Path)
	}
	return newCorpus(blobs, cfg.MaxMapped), parts, nil
}

// readColumn appends the rows of cfg.Column in the Parquet file path to the spills.
func readColumn(path string, cfg Config, spills []*spill) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("text: %w", err)
	}
	defer f.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("text: %s: unreadable Parquet (corrupted?): %v", path, r)
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("text: %w", err)
	}
	pf, err := pq.OpenFile(f, st.Size(), pq.SkipPageIndex(true), pq.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("text: %s: not a readable Parquet file: %w", path, err)
	}
	col, err := stringColumn(pf, cfg.Column)
	if err != nil {
		return fmt.Errorf("text: %s: %w", path, err)
	}
	pages := col.Pages()
	defer pages.Close()
	vals := make([]pq.Value, 1024)
	var rows int64
	for {
		page, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("text: %s: column %q: %w", path, cfg.Column, err)
		}
		r := page.Values()
		for {
			n, rerr := r.ReadValues(vals)
			rows += int64(n)
			for _, v := range vals[:n] {
				if err := add(v, cfg.Val, spills); err != nil {
					return fmt.Errorf("text: spilling the Parquet column (Config.TempDir %q): %w", cfg.TempDir, err)
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return fmt.Errorf("text: %s: column %q: %w", path, cfg.Column, rerr)
			}
			if n == 0 {
				return fmt.Errorf("text: %s: column %q: a page reader made no progress: corrupted", path, cfg.Column)
			}
		}
	}
	if rows != pf.NumRows() {
		return fmt.Errorf("text: %s: column %q holds %d values, the file %d rows: corrupted", path, cfg.Column, rows, pf.NumRows())
	}
	return nil
}

// add writes one row's text, and its end-of-document byte, to its split's spill.
func add(v pq.Value, val float64, spills []*spill) error {
	if v.IsNull() {
		return nil
	}
	text := v.ByteArray()
	if len(text) == 0 {
		return nil
	}
	sp := spills[0]
	if len(spills) == 2 && heldOut(text, val) {
		sp = spills[1]
	}
	if _, err := sp.w.Write(text); err != nil {
		return err
	}
	if err := sp.w.WriteByte(0); err != nil {
		return err
	}
	sp.rows++
	sp.size += int64(len(text)) + 1
	return nil
}

// stringColumn finds the column name (a dotted path into groups) and checks it holds one string
// (BYTE_ARRAY) value per row.
func stringColumn(pf *pq.File, name string) (*pq.Column, error) {
	c := pf.Root()
	path := strings.Split(name, ".")
	for k, p := range path {
		next := c.Column(p)
		if next == nil {
			var have []string
			for _, ch := range c.Columns() {
				have = append(have, ch.Name())
			}
			where := "the file"
			if k > 0 {
				where = fmt.Sprintf("group %q", strings.Join(path[:k], "."))
			}
			return nil, fmt.Errorf("Config.Column %q: not found: %s has columns %s; name a string column", name, where, strings.Join(have, ", "))
		}
		c = next
	}
	switch {
	case !c.Leaf():
		return nil, fmt.Errorf("Config.Column %q is a group or a list (%s), not a string column: name a column of one string per row", name, c.Type())
	case c.MaxRepetitionLevel() > 0:
		return nil, fmt.Errorf("Config.Column %q is repeated (a list of %s per row), not one string per row: name a string column", name, c.Type())
	case c.Type().Kind() != pq.ByteArray:
		return nil, fmt.Errorf("Config.Column %q holds %s values, not strings: name a string (BYTE_ARRAY) column", name, c.Type())
	}
	return c, nil
}
