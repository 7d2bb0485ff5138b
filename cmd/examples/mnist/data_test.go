package mnist_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
)

func TestLoadAndCarveIsDeterministic(t *testing.T) {
	dir, err := mnist.DataDir("")
	if err != nil {
		t.Fatalf("MNIST must be in the module cache after `make setup`: %v", err)
	}
	s, err := mnist.Load(dir, "t10k", 500)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 500 || s.Images.Shape().Dimensions[1] != 784 {
		t.Fatalf("loaded %d samples of %v", s.N, s.Images.Shape())
	}
	var lo, hi float32 = 1, 0
	tensors.MustConstFlatData[float32](s.Images, func(f []float32) {
		for _, v := range f {
			lo, hi = min(lo, v), max(hi, v)
		}
	})
	if lo != 0 || hi != 1 {
		t.Fatalf("pixels should span [0, 1], got [%v, %v]", lo, hi)
	}
	a1, b1, err := s.Split(100, 7)
	if err != nil {
		t.Fatal(err)
	}
	a2, b2, _ := s.Split(100, 7)
	_, b3, _ := s.Split(100, 8)
	if a1.N != 400 || b1.N != 100 {
		t.Fatalf("split sizes %d/%d", a1.N, b1.N)
	}
	l1 := tensors.MustCopyFlatData[int32](b1.Labels)
	l2 := tensors.MustCopyFlatData[int32](b2.Labels)
	l3 := tensors.MustCopyFlatData[int32](b3.Labels)
	same := func(x, y []int32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(l1, l2) {
		t.Fatal("the same seed must carve the same validation set")
	}
	if same(l1, l3) {
		t.Fatal("another seed should carve another validation set")
	}
	_ = a2
}

func TestDataDirErrorNamesTheFix(t *testing.T) {
	_, err := mnist.DataDir(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "train-images-idx3-ubyte.gz") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOPATH", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv(mnist.EnvDataDir, "")
	t.Setenv("PATH", "")
	_, err = mnist.DataDir("")
	if err == nil || !strings.Contains(err.Error(), "make setup") || !strings.Contains(err.Error(), "NITRO_MNIST_DIR") {
		t.Fatalf("got %v", err)
	}
}
