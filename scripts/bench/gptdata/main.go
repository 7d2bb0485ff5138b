// Command gptdata writes the batches `nitro train gpt --preset small` trains and validates on, so
// that the JAX peer (scripts/bench/jax_gpt.py) trains on byte-identical windows.
//
// It opens the corpus as cmd/examples/gpt's BuildData does (text.Split; an empty -corpus is the
// Go source tree's .go files) and reads the train split the way core's loop does: epochs 1 to
// -epochs, BeginEpoch(epoch) once each, then batches 0 to Len-1 in index order; the val split
// is the same every epoch. It writes, under -out:
//
//	train_tokens.npy, train_targets.npy  int32 [epochs, batches, BatchSize, Context]
//	val_tokens.npy, val_targets.npy      int32 [ValBatches, BatchSize, Context]
//	meta.json                            the text.Config, the corpus's file counts, the shapes
//
// Then it checks what it wrote against a fresh Split read through prefetch.Start, core's batch
// stream with its default fan-out: epoch 1's first batch, the last epoch's last batch and the
// first val batch must be equal, tokens and targets.
//
// It is its own module (go.mod here, prefetch and tensorfile replaced by the tree's folders) so
// that neither go.work nor any nitro module gains a bench-only program; run it with GOWORK=off:
//
//	cd scripts/bench/gptdata && GOWORK=off go run . -out /tmp/gptdata
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/text"
)

// meta is meta.json: enough for the peer to check it read what it expects.
type meta struct {
	Corpus          string   `json:"corpus"`
	Extensions      []string `json:"extensions"`
	Context         int      `json:"context"`
	BatchSize       int      `json:"batch_size"`
	BatchesPerEpoch int      `json:"batches_per_epoch"`
	ValBatches      int      `json:"val_batches"`
	Val             float64  `json:"val"`
	Seed            uint64   `json:"seed"`
	Epochs          int      `json:"epochs"`
	FirstEpoch      int      `json:"first_epoch"`
	TrainFiles      int      `json:"train_files"`
	ValFiles        int      `json:"val_files"`
	TrainShape      []int    `json:"train_shape"`
	ValShape        []int    `json:"val_shape"`
}

func main() {
	out := flag.String("out", "", "folder to write the .npy files and meta.json into (required)")
	corpus := flag.String("corpus", "", "the corpus (gpt's Corpus field); empty: the Go source tree's .go files")
	epochs := flag.Int("epochs", 8, "epochs of train batches (gpt's MaxEpochs)")
	cfg := text.Config{}
	flag.IntVar(&cfg.Context, "context", 64, "gpt's Context")
	flag.IntVar(&cfg.BatchSize, "batch", 12, "gpt's BatchSize")
	flag.IntVar(&cfg.BatchesPerEpoch, "batches", 250, "gpt's BatchesPerEpoch")
	flag.IntVar(&cfg.ValBatches, "val-batches", 20, "gpt's ValBatches")
	flag.Float64Var(&cfg.Val, "val", 0.05, "gpt's Val")
	seed := flag.Int("seed", 42, "gpt's Seed")
	flag.Parse()
	if *out == "" || *epochs < 1 || *seed < 0 {
		log.Fatal("gptdata: -out is required, -epochs >= 1, -seed >= 0")
	}
	cfg.Seed = uint64(*seed)
	// gpt's textConfig: Corpus, else DefaultCorpus with the .go files only.
	cfg.Path = *corpus
	if cfg.Path == "" {
		p, err := text.DefaultCorpus()
		if err != nil {
			log.Fatal(err)
		}
		cfg.Path, cfg.Extensions = p, text.GoSource()
	}
	if err := run(cfg, *epochs, *out); err != nil {
		log.Fatal("gptdata: ", err)
	}
}

func run(cfg text.Config, epochs int, out string) error {
	data, err := text.Split(cfg)
	if err != nil {
		return err
	}
	defer text.CloseAll(data)
	train, val := data["train"].(*text.Source), data["val"].(*text.Source)
	b, t := cfg.BatchSize, cfg.Context
	var trTok, trTgt, vaTok, vaTgt []int32
	// core numbers epochs from 1 and calls BeginEpoch(epoch) before the epoch's first batch.
	for ep := 1; ep <= epochs; ep++ {
		if err := train.BeginEpoch(ep); err != nil {
			return err
		}
		for i := range train.Len() {
			if trTok, trTgt, err = appendBatch(train, i, trTok, trTgt); err != nil {
				return err
			}
		}
	}
	if err := val.BeginEpoch(1); err != nil {
		return err
	}
	for i := range val.Len() {
		if vaTok, vaTgt, err = appendBatch(val, i, vaTok, vaTgt); err != nil {
			return err
		}
	}
	trShape := []int{epochs, train.Len(), b, t}
	vaShape := []int{val.Len(), b, t}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, v := range map[string][]int32{"train_tokens": trTok, "train_targets": trTgt} {
		if err := writeNpy(filepath.Join(out, name+".npy"), v, trShape); err != nil {
			return err
		}
	}
	for name, v := range map[string][]int32{"val_tokens": vaTok, "val_targets": vaTgt} {
		if err := writeNpy(filepath.Join(out, name+".npy"), v, vaShape); err != nil {
			return err
		}
	}
	m := meta{Corpus: cfg.Path, Extensions: cfg.Extensions, Context: t, BatchSize: b, BatchesPerEpoch: cfg.BatchesPerEpoch,
		ValBatches: cfg.ValBatches, Val: cfg.Val, Seed: cfg.Seed, Epochs: epochs, FirstEpoch: 1,
		TrainFiles: len(train.Files()), ValFiles: len(val.Files()), TrainShape: trShape, ValShape: vaShape}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "meta.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	per := b * t
	nb := train.Len()
	if err := check(cfg, "train", 1, 0, trTok[:per], trTgt[:per]); err != nil {
		return err
	}
	last := (epochs*nb - 1) * per
	if err := check(cfg, "train", epochs, nb-1, trTok[last:last+per], trTgt[last:last+per]); err != nil {
		return err
	}
	if err := check(cfg, "val", 1, 0, vaTok[:per], vaTgt[:per]); err != nil {
		return err
	}
	fmt.Printf("gptdata: wrote %s: train %v (%d files), val %v (%d files) of %s; checked against prefetch.Start\n",
		out, trShape, m.TrainFiles, vaShape, m.ValFiles, cfg.Path)
	return nil
}

// appendBatch appends batch i's tokens and targets, row-major.
func appendBatch(src *text.Source, i int, tok, tgt []int32) ([]int32, []int32, error) {
	bt, err := src.BatchAt(i)
	if err != nil {
		return nil, nil, err
	}
	return append(tok, tensors.MustCopyFlatData[int32](bt[text.Tokens])...),
		append(tgt, tensors.MustCopyFlatData[int32](bt[text.Targets])...), nil
}

// check reads split's batch `index` of epoch ep from a freshly opened Split, through
// prefetch.Start with the default fan-out as core's stream does, and compares it with what was
// written.
func check(cfg text.Config, split string, ep, index int, tok, tgt []int32) error {
	data, err := text.Split(cfg)
	if err != nil {
		return err
	}
	defer text.CloseAll(data)
	src, err := prefetch.Prefetch(data[split], prefetch.Defaults())
	if err != nil {
		return err
	}
	s, err := prefetch.Start(context.Background(), src, ep, prefetch.StreamConfig[prefetch.Batch]{
		Transfer: func(b prefetch.Batch) (prefetch.Batch, error) { return b, nil },
		Free:     func(prefetch.Batch) error { return nil },
		From:     index, To: index + 1,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	it, ok, err := s.Next()
	if err != nil || !ok {
		return fmt.Errorf("check %s epoch %d batch %d: no batch (%v)", split, ep, index, err)
	}
	gotTok := tensors.MustCopyFlatData[int32](it.Device[text.Tokens])
	gotTgt := tensors.MustCopyFlatData[int32](it.Device[text.Targets])
	if it.Index != index || !slices.Equal(gotTok, tok) || !slices.Equal(gotTgt, tgt) {
		return fmt.Errorf("check %s epoch %d batch %d: the stream's batch (index %d) differs from the one written", split, ep, index, it.Index)
	}
	return nil
}

// writeNpy writes v as a little-endian int32 .npy (format 1.0), C order.
func writeNpy(path string, v []int32, shape []int) error {
	dims := ""
	for _, d := range shape {
		dims += fmt.Sprintf("%d, ", d)
	}
	header := fmt.Sprintf("{'descr': '<i4', 'fortran_order': False, 'shape': (%s), }", dims)
	// The magic, version and length take 10 bytes; the header is padded with spaces to a
	// multiple of 64 and ends in a newline.
	header += strings.Repeat(" ", (64-(10+len(header)+1)%64)%64) + "\n"
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, 10+len(header)+4*len(v))
	buf = append(buf, "\x93NUMPY\x01\x00"...)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(header)))
	buf = append(buf, header...)
	for _, x := range v {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
