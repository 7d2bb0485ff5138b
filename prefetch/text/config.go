package text

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// The batch fields a Source serves, both [BatchSize, Context] int32 byte values in [0, 256).
const (
	// Tokens is the input field: the first Context bytes of each window.
	Tokens = "tokens"
	// Targets is the target field: the window's last Context bytes, Tokens shifted left by one,
	// so targets[b][t] is the byte that follows tokens[b][t].
	Targets = "targets"
)

// Vocab is the vocabulary size: the tokens are the bytes themselves.
const Vocab = 256

// DefaultMaxMapped is how many files a corpus keeps memory-mapped at once when
// Config.MaxMapped is 0: the Go source tree's 8,000 files fit, and a quarter of Linux's default
// per-process limit of 65,530 mappings (vm.max_map_count) is left for the rest of the process.
const DefaultMaxMapped = 16384

// Limits on the shape of a batch, so that index arithmetic and one batch's allocation stay sane
// whatever a configuration says.
const (
	maxContext    = 1 << 24
	maxBatchElems = 1 << 28 // BatchSize*Context, per field
	maxWindows    = 1 << 40 // windows per epoch, BatchesPerEpoch*BatchSize (ValBatches likewise)
)

// Config configures Open and Split.
type Config struct {
	// Path is the corpus: a text file, a folder of them (walked in sorted order, hidden names
	// skipped), or, with Column, a Parquet file or a folder of *.parquet files.
	Path string
	// Column, when set, reads Path as Parquet: the text is this string (or binary) column, one
	// document per row; a dotted path names a column inside a group.
	Column string
	// Extensions are the file name endings a folder walk includes, such as GoSource() (".go").
	// Nil includes every regular file. Ignored for a single file and for Parquet.
	Extensions []string
	// Context is the tokens per sample; a window is Context+1 bytes.
	Context int
	// BatchSize is the windows per batch.
	BatchSize int
	// BatchesPerEpoch is the train split's batches per epoch (Len). 0: its bytes divided by
	// BatchSize*Context (about one pass over the text per epoch), at least 1.
	BatchesPerEpoch int
	// ValBatches is the val split's batches. 0: its bytes divided by BatchSize*Context, at least 1.
	ValBatches int
	// Val is the fraction held out for the val split, in [0, 1): of the files of a folder (by a
	// hash of each file's path), of the rows of a Parquet column (by a hash of each row's text),
	// or the tail of a single file. 0 is no val split (Split returns only "train").
	Val float64
	// Seed draws the window positions: the train split's from Seed and the epoch, the val
	// split's from Seed alone (the same val batches every epoch).
	Seed uint64
	// MaxMapped bounds the files mapped at once (0: DefaultMaxMapped); the least recently used
	// is unmapped to map another.
	MaxMapped int
	// TempDir is where a Parquet column is spilled, decoded, for mapping ("": os.TempDir()).
	// The spill is about the column's text size, and is removed by Close.
	TempDir string
}

// GoSource is the Extensions preset for Go source: []string{".go"}.
func GoSource() []string { return []string{".go"} }

// check refuses a configuration before anything is opened, naming the field and the fix.
func (c Config) check() error {
	switch {
	case c.Path == "":
		return errors.New("text: Config.Path is empty: name a text file, a folder, or a Parquet file with Column (DefaultCorpus() is the Go source tree)")
	case c.Context <= 0 || c.Context > maxContext:
		return fmt.Errorf("text: Config.Context %d: must be in [1, %d]", c.Context, maxContext)
	case c.BatchSize <= 0:
		return fmt.Errorf("text: Config.BatchSize %d: must be positive", c.BatchSize)
	case c.BatchSize > maxBatchElems/c.Context:
		return fmt.Errorf("text: Config.BatchSize %d x Context %d: more than %d values per field; lower either", c.BatchSize, c.Context, maxBatchElems)
	case c.BatchesPerEpoch > maxWindows/c.BatchSize || c.ValBatches > maxWindows/c.BatchSize:
		return fmt.Errorf("text: Config.BatchesPerEpoch %d or ValBatches %d x BatchSize %d: more than %d windows an epoch; lower them", c.BatchesPerEpoch, c.ValBatches, c.BatchSize, int64(maxWindows))
	case c.BatchesPerEpoch < 0:
		return fmt.Errorf("text: Config.BatchesPerEpoch %d: must be positive, or 0 for the train bytes / (BatchSize*Context)", c.BatchesPerEpoch)
	case c.ValBatches < 0:
		return fmt.Errorf("text: Config.ValBatches %d: must be positive, or 0 for the val bytes / (BatchSize*Context)", c.ValBatches)
	case !(c.Val >= 0 && c.Val < 1):
		return fmt.Errorf("text: Config.Val %v: must be a fraction in [0, 1)", c.Val)
	case c.MaxMapped < 0:
		return fmt.Errorf("text: Config.MaxMapped %d: must be positive, or 0 for %d", c.MaxMapped, DefaultMaxMapped)
	}
	for k, e := range c.Extensions {
		if len(e) < 2 || e[0] != '.' || strings.ContainsAny(e, `/\`) {
			return fmt.Errorf("text: Config.Extensions[%d] = %q: want a file name ending such as \".go\" (a dot, then at least one character, no separator)", k, e)
		}
	}
	return nil
}

// DefaultCorpus is the default corpus, which needs no download: the Go toolchain's own source
// tree, GOROOT/src (use it with Extensions: GoSource()). GOROOT is $GOROOT, else the one this
// binary was built with, else what `go env GOROOT` says; the first whose src folder exists wins.
func DefaultCorpus() (string, error) {
	goEnv := func() (string, error) {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		return strings.TrimSpace(string(out)), err
	}
	return findGoSrc([]string{os.Getenv("GOROOT"), runtime.GOROOT()}, goEnv) //nolint:staticcheck // runtime.GOROOT is one fallback; `go env` is the next
}

// findGoSrc is the src folder of the first root that has one: roots, then what goEnv says.
func findGoSrc(roots []string, goEnv func() (string, error)) (string, error) {
	var tried []string
	for k := 0; k <= len(roots); k++ {
		var root string
		if k < len(roots) {
			root = roots[k]
		} else {
			var err error
			if root, err = goEnv(); err != nil {
				tried = append(tried, "`go env GOROOT` failed: "+err.Error())
			}
		}
		if root == "" {
			continue
		}
		src := filepath.Join(root, "src")
		if st, err := os.Stat(src); err == nil && st.IsDir() {
			return src, nil
		}
		tried = append(tried, "no folder "+src)
	}
	return "", fmt.Errorf("text: DefaultCorpus: no Go source tree found (%s): install Go or set GOROOT, or set Config.Path to a text corpus", strings.Join(tried, "; "))
}
