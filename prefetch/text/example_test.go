package text_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/text"
)

// Split cuts a folder of text into a train split, re-drawn every epoch, and a val split held
// out by file. (DefaultCorpus() with Extensions: text.GoSource() is the Go source tree.)
func ExampleSplit() {
	dir, err := os.MkdirTemp("", "text-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for k := range 20 {
		line := fmt.Sprintf("file %02d says hello, world.\n", k)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", k)), []byte(strings.Repeat(line, 40)), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	data, err := text.Split(text.Config{Path: dir, Context: 16, BatchSize: 4, Val: 0.2, Seed: 1, BatchesPerEpoch: 10, ValBatches: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer text.CloseAll(data)

	train, val := data["train"].(*text.Source), data["val"].(*text.Source)
	fmt.Println("train:", len(train.Files()), "files,", train.Len(), "batches; val:", len(val.Files()), "files,", val.Len(), "batches")
	if err := train.BeginEpoch(0); err != nil {
		log.Fatal(err)
	}
	fmt.Println("CheckBatchAt:", prefetch.CheckBatchAt(train, true))
	b, err := train.BatchAt(0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(text.Tokens, b[text.Tokens].Shape(), text.Targets, b[text.Targets].Shape())
	tok, tgt := tensors.MustCopyFlatData[int32](b[text.Tokens]), tensors.MustCopyFlatData[int32](b[text.Targets])
	fmt.Println("targets are tokens shifted by one:", tok[1] == tgt[0] && tok[15] == tgt[14])
	// Output:
	// train: 14 files, 10 batches; val: 6 files, 3 batches
	// CheckBatchAt: <nil>
	// tokens (Int32)[4 16] targets (Int32)[4 16]
	// targets are tokens shifted by one: true
}
