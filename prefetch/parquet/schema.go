package parquet

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gomlx/gopjrt/dtypes"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// supported are the tensor dtypes a Field may declare.
var supported = []dtypes.DType{
	dtypes.Bool,
	dtypes.Int8, dtypes.Int16, dtypes.Int32, dtypes.Int64,
	dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64,
	dtypes.Float32, dtypes.Float64,
}

// parseDType reads a Field.DType: a GoMLX dtype name such as "Float32", "Int64" or "Uint8".
func parseDType(s string) (dtypes.DType, error) {
	dt, ok := dtypes.MapOfNames[s]
	if ok && slices.Contains(supported, dt) {
		return dt, nil
	}
	names := make([]string, len(supported))
	for i, d := range supported {
		names[i] = d.String()
	}
	return dtypes.InvalidDType, fmt.Errorf("DType %q: want one of %s", s, strings.Join(names, ", "))
}

// column is a field's resolved leaf column in one file.
type column struct {
	leaf     *pq.Column
	dtype    dtypes.DType // what the column holds
	unsigned bool         // an unsigned integer annotation on a physical INT32/INT64
	maxDef   int          // the definition level of a present value
	list     bool         // a repeated leaf: one list per row
}

// resolve finds the leaf column a field reads in one file and checks it can fill the field.
func resolve(file *pq.File, name string, f *field) (*column, error) {
	path := strings.Split(f.column, ".")
	c := file.Root()
	for k, p := range path {
		next := c.Column(p)
		if next == nil {
			where := "the file"
			if k > 0 {
				where = fmt.Sprintf("group %q", strings.Join(path[:k], "."))
			}
			var have []string
			for _, ch := range c.Columns() {
				have = append(have, ch.Name())
			}
			return nil, fmt.Errorf("column %q (field %q) not found: %s has columns %s", f.column, name, where, strings.Join(have, ", "))
		}
		c = next
	}
	leaf, isList, err := listLeaf(c)
	if err != nil {
		return nil, fmt.Errorf("column %q (field %q): %w", f.column, name, err)
	}
	switch {
	case isList && len(f.shape) == 0:
		return nil, fmt.Errorf("column %q (field %q) is a list, but the field declares no Shape (a scalar): declare the per-sample shape, prod(Shape) values per row", f.column, name)
	case !isList && len(f.shape) > 0:
		return nil, fmt.Errorf("column %q (field %q) holds one value per row, but the field declares Shape %v (%d values per row): use a list column, or no Shape", f.column, name, f.shape, f.per)
	}
	dt, unsigned, err := leafDType(leaf.Type())
	if err != nil {
		return nil, fmt.Errorf("column %q (field %q): %w", f.column, name, err)
	}
	if !convertible(dt, f.dtype) {
		return nil, fmt.Errorf("column %q (field %q) holds %s (%s), which does not convert to DType %s: integers convert to any integer dtype (range-checked) or float dtype, floats to float dtypes, booleans to Bool",
			f.column, name, leaf.Type(), dt, f.dtype)
	}
	return &column{leaf: leaf, dtype: dt, unsigned: unsigned, maxDef: leaf.MaxDefinitionLevel(), list: isList}, nil
}

// listLeaf returns c's leaf when c is a primitive column (list false) or a flat list of
// primitives (list true): the standard three-level LIST (group of a repeated group of one
// element), the two-level legacy forms, or a bare repeated primitive. Lists of lists, maps and
// structs are refused.
func listLeaf(c *pq.Column) (leaf *pq.Column, list bool, err error) {
	if c.Leaf() {
		if c.MaxRepetitionLevel() > 1 {
			return nil, false, fmt.Errorf("a nested repeated column: only flat lists map to a tensor field")
		}
		return c, c.MaxRepetitionLevel() == 1, nil
	}
	if c.Repeated() || len(c.Columns()) != 1 {
		return nil, false, fmt.Errorf("a group of %d columns (%s), not a number nor a flat list of numbers", len(c.Columns()), c.Type())
	}
	inner := c.Columns()[0]
	if !inner.Repeated() {
		return nil, false, fmt.Errorf("a group (%s) whose child %q is not repeated: not a list", c.Type(), inner.Name())
	}
	if !inner.Leaf() {
		if len(inner.Columns()) != 1 || !inner.Columns()[0].Leaf() {
			return nil, false, fmt.Errorf("a list of groups or of lists: only a flat list of numbers maps to a tensor field")
		}
		inner = inner.Columns()[0]
	}
	if inner.MaxRepetitionLevel() != 1 {
		return nil, false, fmt.Errorf("a list nested in another repeated column: only a flat list of numbers maps to a tensor field")
	}
	return inner, true, nil
}

// leafDType maps a leaf column's type to the dtype it holds.
func leafDType(t pq.Type) (dt dtypes.DType, unsigned bool, err error) {
	kind := t.Kind()
	fromInt := func(bits int, signed bool) (dtypes.DType, bool, error) {
		want := pq.Int32
		if bits == 64 {
			want = pq.Int64
		}
		if kind != want {
			return dtypes.InvalidDType, false, fmt.Errorf("an INT(%d) annotation on a %s column: corrupted schema", bits, kind)
		}
		switch {
		case bits == 8 && signed:
			return dtypes.Int8, false, nil
		case bits == 16 && signed:
			return dtypes.Int16, false, nil
		case bits == 32 && signed:
			return dtypes.Int32, false, nil
		case bits == 64 && signed:
			return dtypes.Int64, false, nil
		case bits == 8:
			return dtypes.Uint8, true, nil
		case bits == 16:
			return dtypes.Uint16, true, nil
		case bits == 32:
			return dtypes.Uint32, true, nil
		case bits == 64:
			return dtypes.Uint64, true, nil
		}
		return dtypes.InvalidDType, false, fmt.Errorf("an INT(%d) annotation: bit width must be 8, 16, 32 or 64", bits)
	}
	if lt := t.LogicalType(); lt != nil && lt.Value != nil {
		if it, ok := lt.Value.(*format.IntType); ok {
			return fromInt(int(it.BitWidth), it.IsSigned)
		}
		return dtypes.InvalidDType, false, fmt.Errorf("holds %s values: a field needs a numeric column (integers, floats or booleans)", t)
	}
	if ct := t.ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.Int8:
			return fromInt(8, true)
		case deprecated.Int16:
			return fromInt(16, true)
		case deprecated.Int32:
			return fromInt(32, true)
		case deprecated.Int64:
			return fromInt(64, true)
		case deprecated.Uint8:
			return fromInt(8, false)
		case deprecated.Uint16:
			return fromInt(16, false)
		case deprecated.Uint32:
			return fromInt(32, false)
		case deprecated.Uint64:
			return fromInt(64, false)
		}
		return dtypes.InvalidDType, false, fmt.Errorf("holds %s values: a field needs a numeric column (integers, floats or booleans)", t)
	}
	switch kind {
	case pq.Boolean:
		return dtypes.Bool, false, nil
	case pq.Int32:
		return dtypes.Int32, false, nil
	case pq.Int64:
		return dtypes.Int64, false, nil
	case pq.Float:
		return dtypes.Float32, false, nil
	case pq.Double:
		return dtypes.Float64, false, nil
	}
	return dtypes.InvalidDType, false, fmt.Errorf("holds %s values: a field needs a numeric column (integers, floats or booleans)", t)
}

func isInt(dt dtypes.DType) bool {
	switch dt {
	case dtypes.Int8, dtypes.Int16, dtypes.Int32, dtypes.Int64, dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64:
		return true
	}
	return false
}

func isFloat(dt dtypes.DType) bool { return dt == dtypes.Float32 || dt == dtypes.Float64 }

// convertible is the conversion rule: integers to any integer dtype (each value range-checked
// when read) or float dtype, floats to float dtypes, booleans to Bool.
func convertible(from, to dtypes.DType) bool {
	switch {
	case from == to:
		return true
	case isInt(from):
		return isInt(to) || isFloat(to)
	case isFloat(from):
		return isFloat(to)
	}
	return false
}

// intRange is the range of an integer dtype below 64 bits unsigned, as int64.
func intRange(dt dtypes.DType) (lo, hi int64) {
	switch dt {
	case dtypes.Int8:
		return math.MinInt8, math.MaxInt8
	case dtypes.Int16:
		return math.MinInt16, math.MaxInt16
	case dtypes.Int32:
		return math.MinInt32, math.MaxInt32
	case dtypes.Uint8:
		return 0, math.MaxUint8
	case dtypes.Uint16:
		return 0, math.MaxUint16
	case dtypes.Uint32:
		return 0, math.MaxUint32
	case dtypes.Uint64:
		return 0, math.MaxInt64 // the rest of its range is handled as uint64
	}
	return math.MinInt64, math.MaxInt64
}
