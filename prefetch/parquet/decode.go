package parquet

import (
	"fmt"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/gomlx/gopjrt/dtypes"
	pq "github.com/parquet-go/parquet-go"
)

// decodeChunk reads one column chunk into f's dtype: exactly f.per present values for each of
// the group's rows. Values are read a block at a time: their levels are checked (row starts,
// nulls, list lengths) in one pass, then the block is converted in one typed loop.
func decodeChunk(chunk pq.ColumnChunk, col *column, f *field, grp group) ([]byte, error) {
	pages := chunk.Pages()
	defer pages.Close()
	esz := f.dtype.Size()
	out := make([]byte, 0, min(grp.rows*f.rowBytes, 64<<20))
	vals := make([]pq.Value, 4096)
	row, count := -1, 0
	short := func() error {
		return fmt.Errorf("row %d: %d values, Shape %v needs %d", grp.fileFirst+row, count, f.shape, f.per)
	}
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		vr := p.Values()
		for {
			n, rerr := vr.ReadValues(vals)
			blockRow := row // the row before the block, to find a bad value's row
			for _, v := range vals[:n] {
				if v.RepetitionLevel() == 0 {
					if row >= 0 && count != f.per {
						return nil, short()
					}
					row++
					count = 0
					if row >= grp.rows {
						return nil, fmt.Errorf("more rows than the row group's %d: corrupted", grp.rows)
					}
				} else if row < 0 {
					return nil, fmt.Errorf("a list continues before any row starts: corrupted")
				}
				if v.IsNull() || v.DefinitionLevel() != col.maxDef {
					if col.list {
						return nil, fmt.Errorf("row %d: a null or empty list (or a null element): every row needs %d values", grp.fileFirst+row, f.per)
					}
					return nil, fmt.Errorf("row %d: a null: every row needs a value", grp.fileFirst+row)
				}
				if count == f.per {
					return nil, fmt.Errorf("row %d: more than the %d values Shape %v needs", grp.fileFirst+row, f.per, f.shape)
				}
				count++
			}
			if n > 0 {
				off := len(out)
				out = slices.Grow(out, n*esz)[:off+n*esz]
				if bad, why := fill(col, f.dtype, out[off:], vals[:n]); bad >= 0 {
					r := blockRow
					for _, v := range vals[:bad+1] {
						if v.RepetitionLevel() == 0 {
							r++
						}
					}
					return nil, fmt.Errorf("row %d: %s", grp.fileFirst+r, why)
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return nil, rerr
			}
			if n == 0 {
				return nil, fmt.Errorf("a page reader made no progress: corrupted")
			}
		}
	}
	if row >= 0 && count != f.per {
		return nil, short()
	}
	if row+1 != grp.rows {
		return nil, fmt.Errorf("the column holds %d rows, the row group %d: corrupted", row+1, grp.rows)
	}
	return out, nil
}

// number is what a field's buffer holds.
type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// as views b (allocated by make or slices.Grow, at an offset that is a multiple of T's size, so
// aligned) as a []T.
func as[T number](b []byte) []T {
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// fill converts vals, every one present, from column c into dst as dtype to. It returns the
// index of the first value that does not fit, and why, or -1.
func fill(c *column, to dtypes.DType, dst []byte, vals []pq.Value) (int, string) {
	kind := c.leaf.Type().Kind()
	switch {
	case c.dtype == dtypes.Bool:
		for k, v := range vals {
			dst[k] = 0
			if v.Boolean() {
				dst[k] = 1
			}
		}
		return -1, ""
	case isFloat(c.dtype):
		if to == dtypes.Float32 {
			fillFloats(as[float32](dst), vals, kind == pq.Double)
		} else {
			fillFloats(as[float64](dst), vals, kind == pq.Double)
		}
		return -1, ""
	case c.dtype == dtypes.Uint64:
		_, hi := intRange(to)
		var bad int
		switch to {
		case dtypes.Float32:
			bad = fillUint64(as[float32](dst), vals, math.MaxUint64)
		case dtypes.Float64:
			bad = fillUint64(as[float64](dst), vals, math.MaxUint64)
		case dtypes.Uint64:
			bad = fillUint64(as[uint64](dst), vals, math.MaxUint64)
		default:
			bad = withInt(to, dst, func(d any) int { return fillUint64Any(d, vals, uint64(hi)) })
		}
		if bad >= 0 {
			return bad, fmt.Sprintf("value %d does not fit DType %s", vals[bad].Uint64(), to)
		}
		return -1, ""
	}
	// A signed integer, or an unsigned one of at most 32 bits: all fit an int64.
	mode := int64s
	switch {
	case kind == pq.Int32 && c.unsigned:
		mode = uint32s
	case kind == pq.Int32:
		mode = int32s
	}
	colLo, colHi := intRange(c.dtype)
	lo, hi := intRange(to)
	if isFloat(to) {
		lo, hi = math.MinInt64, math.MaxInt64
	}
	lo, hi = max(lo, colLo), min(hi, colHi)
	var bad int
	switch to {
	case dtypes.Float32:
		bad = fillInts(as[float32](dst), vals, mode, lo, hi)
	case dtypes.Float64:
		bad = fillInts(as[float64](dst), vals, mode, lo, hi)
	default:
		bad = withInt(to, dst, func(d any) int { return fillIntsAny(d, vals, mode, lo, hi) })
	}
	if bad < 0 {
		return -1, ""
	}
	x := readInt(vals[bad], mode)
	if x < colLo || x > colHi {
		return bad, fmt.Sprintf("value %d is out of the column's own %s range: corrupted data", x, c.dtype)
	}
	return bad, fmt.Sprintf("value %d does not fit DType %s", x, to)
}

// How fillInts reads a value.
const (
	int32s = iota
	uint32s
	int64s
)

func readInt(v pq.Value, mode int) int64 {
	switch mode {
	case int32s:
		return int64(v.Int32())
	case uint32s:
		return int64(v.Uint32())
	}
	return v.Int64()
}

func fillInts[T number](dst []T, vals []pq.Value, mode int, lo, hi int64) int {
	for k, v := range vals {
		var x int64
		switch mode {
		case int32s:
			x = int64(v.Int32())
		case uint32s:
			x = int64(v.Uint32())
		default:
			x = v.Int64()
		}
		if x < lo || x > hi {
			return k
		}
		dst[k] = T(x)
	}
	return -1
}

func fillUint64[T number](dst []T, vals []pq.Value, hi uint64) int {
	for k, v := range vals {
		x := v.Uint64()
		if x > hi {
			return k
		}
		dst[k] = T(x)
	}
	return -1
}

func fillFloats[T float32 | float64](dst []T, vals []pq.Value, double bool) {
	for k, v := range vals {
		if double {
			dst[k] = T(v.Double())
		} else {
			dst[k] = T(v.Float())
		}
	}
}

// withInt calls fill with dst viewed as the integer slice type of dtype to.
func withInt(to dtypes.DType, dst []byte, fill func(any) int) int {
	switch to {
	case dtypes.Int8:
		return fill(as[int8](dst))
	case dtypes.Int16:
		return fill(as[int16](dst))
	case dtypes.Int32:
		return fill(as[int32](dst))
	case dtypes.Int64:
		return fill(as[int64](dst))
	case dtypes.Uint8:
		return fill(as[uint8](dst))
	case dtypes.Uint16:
		return fill(as[uint16](dst))
	case dtypes.Uint32:
		return fill(as[uint32](dst))
	case dtypes.Uint64:
		return fill(as[uint64](dst))
	}
	panic(fmt.Sprintf("parquet: no integer view for %s", to))
}

func fillIntsAny(dst any, vals []pq.Value, mode int, lo, hi int64) int {
	switch d := dst.(type) {
	case []int8:
		return fillInts(d, vals, mode, lo, hi)
	case []int16:
		return fillInts(d, vals, mode, lo, hi)
	case []int32:
		return fillInts(d, vals, mode, lo, hi)
	case []int64:
		return fillInts(d, vals, mode, lo, hi)
	case []uint8:
		return fillInts(d, vals, mode, lo, hi)
	case []uint16:
		return fillInts(d, vals, mode, lo, hi)
	case []uint32:
		return fillInts(d, vals, mode, lo, hi)
	case []uint64:
		return fillInts(d, vals, mode, lo, hi)
	}
	panic(fmt.Sprintf("parquet: fillIntsAny of %T", dst))
}

func fillUint64Any(dst any, vals []pq.Value, hi uint64) int {
	switch d := dst.(type) {
	case []int8:
		return fillUint64(d, vals, hi)
	case []int16:
		return fillUint64(d, vals, hi)
	case []int32:
		return fillUint64(d, vals, hi)
	case []int64:
		return fillUint64(d, vals, hi)
	case []uint8:
		return fillUint64(d, vals, hi)
	case []uint16:
		return fillUint64(d, vals, hi)
	case []uint32:
		return fillUint64(d, vals, hi)
	}
	panic(fmt.Sprintf("parquet: fillUint64Any of %T", dst))
}
