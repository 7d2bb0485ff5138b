package parquet

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/prefetch"
	pq "github.com/parquet-go/parquet-go"
)

// DefaultCacheRowGroups is how many decoded row groups a Source keeps when
// Config.CacheRowGroups is 0.
const DefaultCacheRowGroups = 8

// Field maps one Parquet column to one batch field.
type Field struct {
	// Column is the column's name, a dotted path for a column inside a group; empty means the
	// field's own name.
	Column string
	// DType is the field's tensor dtype, by GoMLX name: "Bool", "Int8", "Int16", "Int32",
	// "Int64", "Uint8", "Uint16", "Uint32", "Uint64", "Float32" or "Float64". The column converts
	// to it when its values can: integers to any integer dtype (each value range-checked as it
	// is read) or float dtype, floats to float dtypes, booleans to Bool.
	DType string
	// Shape is the per-sample shape. Empty: the column holds one number per row. Otherwise the
	// column is a list of exactly prod(Shape) numbers per row, in row-major order (a
	// fixed-size list; Arrow's FixedSizeList is stored as such a list).
	Shape []int
}

// Config configures Open.
type Config struct {
	Fields    map[string]Field // batch fields by name; at least one
	BatchSize int              // samples per batch; positive
	// DropPartial drops the final batch when it would be short (the train split must).
	DropPartial bool
	// Shuffle serves each epoch in the order rand.New(rand.NewPCG(Seed, epoch)).Perm(Samples()),
	// drawn by BeginEpoch: the permutation ArrayBatches draws, so a Source and an ArrayBatches
	// over the same samples in the same order serve the same batches.
	Shuffle bool
	Seed    uint64
	// CacheRowGroups bounds the decoded row groups kept (0: DefaultCacheRowGroups). A shuffled
	// epoch draws every batch from across the files, so it reads well only when the cache holds
	// every row group (see Source.RowGroups); in order, one or two groups per caller suffice.
	CacheRowGroups int
	// Rows, when not nil, are the samples the source serves, in this order: indices into the
	// rows of the files, concatenated in file name order. A split carved from a file (the first
	// N rows, a validation set drawn by a seed) is a Rows list over it. Indices may repeat.
	Rows []int
}

// field is a Field resolved against every file.
type field struct {
	name, column string
	dtype        dtypes.DType
	shape        []int
	per          int // values per sample, prod(shape)
	rowBytes     int // bytes per sample in the batch tensor
	cols         []*column
}

type file struct {
	path string
	f    *os.File
	pf   *pq.File
}

// group is one row group: its file, its index in the file, and its rows in the file and in
// the concatenation of all files.
type group struct {
	file, index      int
	fileFirst, first int
	rows             int
}

// Source is an index-addressable prefetch.Source over one Parquet file or a directory of them.
// It is safe for concurrent BatchAt calls (and Sequential walks) within an epoch; BeginEpoch
// must not overlap them, as the prefetch.Source contract says.
type Source struct {
	files       []*file
	fields      []*field // sorted by name
	groups      []group
	total       int   // rows in all files
	rows        []int // Config.Rows (a copy); nil serves every row in order
	n, size     int
	dropPartial bool
	shuffle     bool
	seed        uint64
	perm        atomic.Pointer[[]int] // the epoch's sample order; nil serves the stored order
	cache       *cache
}

var (
	_ prefetch.EpochSource      = (*Source)(nil)
	_ prefetch.PartialDropper   = (*Source)(nil)
	_ prefetch.SequentialSource = (*Source)(nil)
)

// maxRows bounds the rows a source may claim, so index arithmetic cannot overflow whatever a
// corrupted footer says.
const maxRows = 1 << 40

// Open opens a Parquet file, or every *.parquet file directly inside a directory (in name
// order, as one dataset), and checks every configured column against every file's schema: a
// missing column or one that cannot fill its field is an error naming the file and the column.
// Only the footers are read here; row groups are decoded when a batch needs them.
//
// Until the first BeginEpoch, batches follow the stored order even when shuffling. The Source
// keeps its files open until Close.
func Open(path string, cfg Config) (_ *Source, err error) {
	fields, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	paths, err := listFiles(path)
	if err != nil {
		return nil, err
	}
	s := &Source{fields: fields, size: cfg.BatchSize, dropPartial: cfg.DropPartial, shuffle: cfg.Shuffle, seed: cfg.Seed}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for k, p := range paths {
		fl, err := openFile(p)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, fl)
		for _, f := range fields {
			col, err := resolve(fl.pf, f.name, f)
			if err != nil {
				return nil, fmt.Errorf("parquet: %s: %w", p, err)
			}
			f.cols = append(f.cols, col)
		}
		fileRows := 0
		for g, rg := range fl.pf.RowGroups() {
			nr := rg.NumRows()
			if nr < 0 || nr > maxRows || int64(s.total+fileRows)+nr > maxRows {
				return nil, fmt.Errorf("parquet: %s: row group %d claims %d rows: corrupted footer", p, g, nr)
			}
			if nr == 0 {
				continue
			}
			s.groups = append(s.groups, group{file: k, index: g, fileFirst: fileRows, first: s.total + fileRows, rows: int(nr)})
			fileRows += int(nr)
		}
		if int64(fileRows) != fl.pf.NumRows() {
			return nil, fmt.Errorf("parquet: %s: the row groups hold %d rows, the footer says %d: corrupted footer", p, fileRows, fl.pf.NumRows())
		}
		s.total += fileRows
	}
	if s.total == 0 {
		return nil, fmt.Errorf("parquet: %s: no rows", path)
	}
	s.n = s.total
	if cfg.Rows != nil {
		for k, r := range cfg.Rows {
			if r < 0 || r >= s.total {
				return nil, fmt.Errorf("parquet: %s: Config.Rows[%d] = %d: out of range [0, %d)", path, k, r, s.total)
			}
		}
		s.rows = slices.Clone(cfg.Rows)
		s.n = len(s.rows)
	}
	if s.n == 0 {
		return nil, fmt.Errorf("parquet: %s: Config.Rows is empty: no samples to serve", path)
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("parquet: %s: %d samples make no batch of BatchSize %d with DropPartial", path, s.n, s.size)
	}
	capacity := cfg.CacheRowGroups
	if capacity == 0 {
		capacity = DefaultCacheRowGroups
	}
	s.cache = newCache(capacity)
	return s, nil
}

func checkConfig(cfg Config) ([]*field, error) {
	if cfg.BatchSize <= 0 {
		return nil, fmt.Errorf("parquet: BatchSize %d: must be positive", cfg.BatchSize)
	}
	if cfg.CacheRowGroups < 0 {
		return nil, fmt.Errorf("parquet: CacheRowGroups %d: must be positive, or 0 for the default (%d)", cfg.CacheRowGroups, DefaultCacheRowGroups)
	}
	if len(cfg.Fields) == 0 {
		return nil, fmt.Errorf("parquet: no Fields: map at least one column to a batch field")
	}
	var fields []*field
	for _, name := range slices.Sorted(maps.Keys(cfg.Fields)) {
		f := cfg.Fields[name]
		dt, err := parseDType(f.DType)
		if err != nil {
			return nil, fmt.Errorf("parquet: field %q: %w", name, err)
		}
		col := f.Column
		if col == "" {
			col = name
		}
		per := 1
		for _, d := range f.Shape {
			if d <= 0 || d > maxRows/per {
				return nil, fmt.Errorf("parquet: field %q: Shape %v: every dimension must be positive (and the product sane)", name, f.Shape)
			}
			per *= d
		}
		fields = append(fields, &field{name: name, column: col, dtype: dt, shape: slices.Clone(f.Shape), per: per, rowBytes: per * dt.Size()})
	}
	return fields, nil
}

// listFiles is path itself, or the *.parquet files directly inside it, sorted.
func listFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && filepath.Ext(e.Name()) == ".parquet" {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parquet: directory %s holds no *.parquet file", path)
	}
	sort.Strings(out)
	return out, nil
}

// openFile opens one file and reads its footer, refusing what is plainly not Parquet before
// the library sees it, and turning a library panic on a corrupted footer into an error.
func openFile(path string) (fl *file, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet: %s: unreadable footer (corrupted?): %v", path, r)
		}
		if err != nil {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	size := st.Size()
	var head, tail [8]byte
	if size < 12 {
		return nil, fmt.Errorf("parquet: %s: %d bytes: too short to be a Parquet file", path, size)
	}
	if _, err := f.ReadAt(head[:4], 0); err != nil {
		return nil, fmt.Errorf("parquet: %s: %w", path, err)
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("parquet: %s: %w", path, err)
	}
	if !bytes.Equal(head[:4], []byte("PAR1")) || !bytes.Equal(tail[4:], []byte("PAR1")) {
		return nil, fmt.Errorf("parquet: %s: not a Parquet file (no PAR1 magic at both ends; encrypted files are not supported)", path)
	}
	if footer := int64(binary.LittleEndian.Uint32(tail[:4])); footer > size-12 {
		return nil, fmt.Errorf("parquet: %s: footer length %d exceeds the file (%d bytes): corrupted or truncated", path, footer, size)
	}
	pf, err := pq.OpenFile(f, size, pq.SkipPageIndex(true), pq.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("parquet: %s: %w", path, err)
	}
	return &file{path: path, f: f, pf: pf}, nil
}

// Close closes the files. A closed Source's BatchAt fails on any row group not cached.
func (s *Source) Close() error {
	var errs []error
	for _, fl := range s.files {
		if fl.f != nil {
			errs = append(errs, fl.f.Close())
			fl.f = nil
		}
	}
	return errors.Join(errs...)
}

// Len is the number of batches in an epoch.
func (s *Source) Len() int {
	if s.dropPartial {
		return s.n / s.size
	}
	return (s.n + s.size - 1) / s.size
}

// Samples is the number of samples served per epoch (before dropping a partial batch).
func (s *Source) Samples() int { return s.n }

// SampleOrdered is true: batch i is samples iB to iB+B-1 of the epoch's plan (Rows, or the
// permutation Config.Shuffle draws), which does not depend on B.
func (s *Source) SampleOrdered() bool { return true }

// DropsPartial reports Config.DropPartial.
func (s *Source) DropsPartial() bool { return s.dropPartial }

// Files lists the files read, in the order their rows are numbered.
func (s *Source) Files() []string {
	out := make([]string, len(s.files))
	for k, fl := range s.files {
		out[k] = fl.path
	}
	return out
}

// RowGroups is the number of non-empty row groups across the files.
func (s *Source) RowGroups() int { return len(s.groups) }

// CacheStats reports the decoded-row-group cache: lookups served from it, row groups decoded
// (misses), and the groups it holds now.
func (s *Source) CacheStats() (hits, decodes int64, held int) {
	return s.cache.hits.Load(), s.cache.misses.Load(), s.cache.len()
}

// BeginEpoch draws the epoch's order when shuffling (see Config.Shuffle), a pure function of
// Seed and epoch, so replaying an epoch serves the same batches. It must not overlap BatchAt.
func (s *Source) BeginEpoch(epoch int) error {
	if !s.shuffle {
		return nil
	}
	perm := rand.New(rand.NewPCG(s.seed, uint64(epoch))).Perm(s.n)
	s.perm.Store(&perm)
	return nil
}

// BatchAt reads batch i of the epoch's plan into fresh tensors, decoding only the row groups
// its samples live in (and only those not cached). Safe from several goroutines at once.
func (s *Source) BatchAt(i int) (prefetch.Batch, error) {
	if i < 0 || i >= s.Len() {
		return nil, fmt.Errorf("parquet: batch index %d out of range [0, %d)", i, s.Len())
	}
	lo := i * s.size
	return s.gather(s.order(), lo, min(lo+s.size, s.n))
}

// Sequential walks the epoch's plan in order with a running sample offset (see
// prefetch.SequentialSource): CheckBatchAt's reference for BatchAt.
func (s *Source) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		order := s.order()
		for offset := 0; offset < s.n; {
			width := min(s.size, s.n-offset)
			if width < s.size && s.dropPartial {
				return
			}
			b, err := s.gather(order, offset, offset+width)
			if !yield(b, err) || err != nil {
				return
			}
			offset += width
		}
	}
}

func (s *Source) order() []int {
	if p := s.perm.Load(); p != nil {
		return *p
	}
	return nil
}

// gather builds the batch of epoch positions lo..hi under order (nil: the stored order).
func (s *Source) gather(order []int, lo, hi int) (prefetch.Batch, error) {
	type ref struct{ pos, row int }
	w := hi - lo
	refs := make([]ref, w)
	for k := range w {
		sample := lo + k
		if order != nil {
			sample = order[sample]
		}
		row := sample
		if s.rows != nil {
			row = s.rows[sample]
		}
		refs[k] = ref{k, row}
	}
	// In row order, so each row group is looked up once per batch.
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.row, b.row) })
	outs := make([]*tensors.Tensor, len(s.fields))
	for fi, f := range s.fields {
		outs[fi] = tensors.FromShape(shapes.Make(f.dtype, append([]int{w}, f.shape...)...))
	}
	err := withBytes(outs, nil, func(dst [][]byte) error {
		for start := 0; start < w; {
			g := s.groupOf(refs[start].row)
			grp := s.groups[g]
			end := start
			for end < w && refs[end].row < grp.first+grp.rows {
				end++
			}
			data, err := s.cache.get(g, func() (*decoded, error) { return s.decode(g) })
			if err != nil {
				return err
			}
			for _, r := range refs[start:end] {
				local := r.row - grp.first
				for fi, f := range s.fields {
					rb := f.rowBytes
					copy(dst[fi][r.pos*rb:(r.pos+1)*rb], data.fields[fi][local*rb:(local+1)*rb])
				}
			}
			start = end
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b := make(prefetch.Batch, len(s.fields))
	for fi, f := range s.fields {
		b[f.name] = outs[fi]
	}
	return b, nil
}

// withBytes calls fn with the byte views of every tensor in ts, held at once.
func withBytes(ts []*tensors.Tensor, views [][]byte, fn func([][]byte) error) error {
	if len(views) == len(ts) {
		return fn(views)
	}
	var inner error
	err := ts[len(views)].MutableBytes(func(b []byte) {
		inner = withBytes(ts, append(views, b), fn)
	})
	if inner != nil {
		return inner
	}
	return err
}

// groupOf is the index of the row group holding row (of the concatenated files).
func (s *Source) groupOf(row int) int {
	return sort.Search(len(s.groups), func(g int) bool { return s.groups[g].first+s.groups[g].rows > row })
}

// decode reads row group g's fields. The library's panics on corrupted pages become errors.
func (s *Source) decode(g int) (d *decoded, err error) {
	grp := s.groups[g]
	fl := s.files[grp.file]
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("parquet: %s: row group %d: unreadable (corrupted?): %v", fl.path, grp.index, r)
		}
	}()
	chunks := fl.pf.RowGroups()[grp.index].ColumnChunks()
	d = &decoded{fields: make([][]byte, len(s.fields))}
	for fi, f := range s.fields {
		col := f.cols[grp.file]
		idx := col.leaf.Index()
		if idx < 0 || idx >= len(chunks) {
			return nil, fmt.Errorf("parquet: %s: row group %d has no chunk for column %q: corrupted", fl.path, grp.index, f.column)
		}
		buf, err := decodeChunk(chunks[idx], col, f, grp)
		if err != nil {
			return nil, fmt.Errorf("parquet: %s: row group %d: column %q (field %q): %w", fl.path, grp.index, f.column, f.name, err)
		}
		d.fields[fi] = buf
	}
	return d, nil
}
