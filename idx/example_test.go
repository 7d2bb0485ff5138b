package idx_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nitro-go/nitro/idx"
)

// Decode reads a plain idx stream; a malformed one is a FormatError saying where and what.
func ExampleDecode() {
	var b bytes.Buffer
	idx.Encode(&b, &idx.Array{Type: idx.Uint8, Dims: []int{2, 3}, Data: []byte{0, 1, 2, 3, 4, 5}})
	a, err := idx.Decode(bytes.NewReader(b.Bytes()))
	fmt.Println(a.Type, a.Dims, a.Float32s(), err)
	_, err = idx.Decode(bytes.NewReader(b.Bytes()[:12]))
	fmt.Println(err)
	// Output:
	// uint8 [2 3] [0 1 2 3 4 5] <nil>
	// idx stream: at byte 12: truncated: dimensions [2 3] of uint8 need 6 data bytes, the stream holds 0
}

// ReadImages and ReadLabels read MNIST's train-images-idx3-ubyte.gz and
// train-labels-idx1-ubyte.gz (gzipped or not).
func ExampleReadImages() {
	dir, _ := os.MkdirTemp("", "idx")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "images-idx3-ubyte")
	var b bytes.Buffer
	idx.Encode(&b, &idx.Array{Type: idx.Uint8, Dims: []int{2, 2, 2}, Data: []byte{0, 64, 128, 255, 1, 2, 3, 4}})
	os.WriteFile(path, b.Bytes(), 0o644)
	im, err := idx.ReadImages(path)
	fmt.Println(im.N, im.Rows, im.Cols, im.Image(0), err)
	_, err = idx.ReadLabels(path)
	fmt.Println(err != nil)
	// Output:
	// 2 2 2 [0 64 128 255] <nil>
	// true
}

// ReadFile reads any idx file, gunzipping it when it starts with the gzip magic.
func ExampleReadFile() {
	dir, _ := os.MkdirTemp("", "idx")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "weights-idx2-float")
	var b bytes.Buffer
	idx.Encode(&b, &idx.Array{Type: idx.Float32, Dims: []int{1, 2}, Data: []byte{0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}})
	os.WriteFile(path, b.Bytes(), 0o644)
	a, err := idx.ReadFile(path)
	fmt.Println(a.Type, a.Dims, a.Float32s(), err)
	// Output:
	// float32 [1 2] [1 -2] <nil>
}

// ReadLabels reads a 1-d uint8 file, MNIST's labels.
func ExampleReadLabels() {
	dir, _ := os.MkdirTemp("", "idx")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "labels-idx1-ubyte")
	var b bytes.Buffer
	idx.Encode(&b, &idx.Array{Type: idx.Uint8, Dims: []int{3}, Data: []byte{7, 2, 1}})
	os.WriteFile(path, b.Bytes(), 0o644)
	fmt.Println(idx.ReadLabels(path))
	// Output:
	// [7 2 1] <nil>
}

// DecodeLimit bounds the data a header may claim, before anything is allocated for it.
func ExampleDecodeLimit() {
	var b bytes.Buffer
	idx.Encode(&b, &idx.Array{Type: idx.Int16, Dims: []int{4}, Data: make([]byte, 8)})
	_, err := idx.DecodeLimit(bytes.NewReader(b.Bytes()), 4)
	fmt.Println(err)
	// Output:
	// idx stream: at byte 4: dimensions [4] of int16 are 8 bytes, over the limit of 4
}
