package optimizers_test

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

func TestNewLayoutOffsets(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	if l.Size != 6 || l.DType != dtypes.Float32 || len(l.Leaves) != 2 {
		t.Fatalf("layout %+v", l)
	}
	if w, b := l.Leaves[0], l.Leaves[1]; w.Offset != 0 || w.Size != 4 || b.Offset != 4 || b.Size != 2 {
		t.Errorf("offsets: weights %d+%d, biases %d+%d", w.Offset, w.Size, b.Offset, b.Size)
	}
	if !l.FlatShape().Equal(shapes.Make(dtypes.Float32, 6)) {
		t.Errorf("FlatShape %s", l.FlatShape())
	}
}

func TestNewLayoutErrors(t *testing.T) {
	f32 := func(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }
	_, err := optimizers.NewLayout("default", []optimizers.ParamLeaf{
		{Keypath: []string{"a", "weights"}, Shape: f32(2)},
		{Keypath: []string{"b", "weights"}, Shape: shapes.Make(dtypes.Float64, 2)},
	})
	mustContain(t, err, "leaf b/weights", "Float64", "one flat buffer of one dtype", "param_group")
	_, err = optimizers.NewLayout("default", []optimizers.ParamLeaf{{Keypath: []string{"a"}, Shape: f32(2)}, {Keypath: []string{"a"}, Shape: f32(2)}})
	mustContain(t, err, "leaf a appears twice")
	_, err = optimizers.NewLayout("default", []optimizers.ParamLeaf{{Shape: f32(2)}})
	mustContain(t, err, "empty keypath")
	_, err = optimizers.NewLayout("default", []optimizers.ParamLeaf{{Keypath: []string{"steps"}, Shape: shapes.Make(dtypes.Int32, 1)}})
	mustContain(t, err, "leaf steps", "float dtype")
	_, err = optimizers.NewLayout("", []optimizers.ParamLeaf{{Keypath: []string{"a"}, Shape: f32(2)}})
	mustContain(t, err, "group name is empty")
	_, err = optimizers.NewLayout("head", nil)
	mustContain(t, err, `group "head" has no leaves`)
}

func TestGroupLayoutsOrder(t *testing.T) {
	f32 := shapes.Make(dtypes.Float32, 3)
	leaves := []optimizers.ParamLeaf{
		{Keypath: []string{"encoder", "w"}, Shape: f32},
		{Keypath: []string{"head", "w"}, Shape: f32},
		{Keypath: []string{"decoder", "w"}, Shape: f32},
		{Keypath: []string{"encoder", "b"}, Shape: f32},
	}
	layouts, err := optimizers.GroupLayouts(leaves, func(kp []string) string {
		if kp[0] == "head" {
			return optimizers.DefaultGroup
		}
		return kp[0]
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range layouts {
		names = append(names, l.Group)
	}
	// Default first, then first appearance.
	if !slices.Equal(names, []string{"default", "encoder", "decoder"}) {
		t.Errorf("group order %v", names)
	}
	if len(layouts[1].Leaves) != 2 || layouts[1].Leaves[1].Offset != 3 {
		t.Errorf("encoder layout %+v", layouts[1])
	}
	all, err := optimizers.GroupLayouts(leaves, nil)
	if err != nil || len(all) != 1 || all[0].Size != 12 {
		t.Errorf("nil param_group: one default group of 12, got %v %v", all, err)
	}
	_, err = optimizers.GroupLayouts(leaves, func([]string) string { return "" })
	mustContain(t, err, "empty name for leaf encoder/w")
}

func TestLayoutHostFlattenRoundTrip(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	w := tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4}, 2, 2)
	b := tensors.FromFlatDataAndDimensions([]float32{5, 6}, 2)
	flat, err := l.Flatten([]*tensors.Tensor{w, b})
	if err != nil {
		t.Fatal(err)
	}
	if got := tensors.MustCopyFlatData[float32](flat); !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("flat %v", got)
	}
	back, err := l.Unflatten(flat)
	if err != nil {
		t.Fatal(err)
	}
	if !back[0].Equal(w) || !back[1].Equal(b) {
		t.Errorf("round trip: %v %v", back[0], back[1])
	}
	_, err = l.Flatten([]*tensors.Tensor{b, w})
	mustContain(t, err, "leaf dense/weights", "want (Float32)[2 2]", "layout order")
	_, err = l.Unflatten(w)
	mustContain(t, err, "Unflatten got shape")
}

type errString string

func (e errString) Error() string { return string(e) }
