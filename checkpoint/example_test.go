package checkpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/tensorfile"
)

// record is a tiny record: one F32 tensor of two elements (1.0 and 2.0).
func record(epoch int, valLoss float64) *checkpoint.Record {
	return &checkpoint.Record{
		Tensors: []checkpoint.Tensor{{Name: "dense/weights", DType: tensorfile.F32, Shape: []int{2},
			Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}}},
		Epoch:   epoch,
		Step:    epoch * 750,
		Metrics: map[string]float64{"val_loss": valLoss},
		Preset:  "mnist-tiny",
	}
}

func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	if err := checkpoint.Write(path, record(3, 0.25)); err != nil {
		fmt.Println(err)
		return
	}
	r, err := checkpoint.Read(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, _ := r.Tensor("dense/weights")
	fmt.Println(r.Epoch, r.Step, w.DType, w.Shape, len(w.Data))
	// Output: 3 2250 F32 [2] 8
}

func ExampleRead() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bad.safetensors")
	os.WriteFile(path, []byte("\x02\x00\x00\x00\x00\x00\x00\x00[]"), 0o644)
	_, err := checkpoint.Read(path)
	var fe *checkpoint.FormatError
	fmt.Println(errors.As(err, &fe), fe.Field, fe.Msg)
	// Output: true header does not start with '{'
}

func ExampleInfo() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	checkpoint.Write(path, record(6, 0.0416831))
	h, err := checkpoint.Info(path) // the header only; no tensor data is read
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Epoch, h.Step, h.Preset, h.Metrics["val_loss"], h.Tensors[0].Name)
	// Output: 6 4500 mnist-tiny 0.0416831 dense/weights
}

func ExampleEncode() {
	var b bytes.Buffer
	checkpoint.Encode(&b, record(1, 0.5))
	fmt.Println(b.Len()%8 == 0, b.Bytes()[8] == '{')
	// Output: true true
}

func ExampleFilename() {
	fmt.Println(checkpoint.Filename(checkpoint.NameArgs{Epoch: 6, Step: 4500, Metric: "val_loss", Score: 0.041683123, Scored: true}))
	fmt.Println(checkpoint.Filename(checkpoint.NameArgs{Epoch: 6, Step: 4500}))
	fmt.Println(checkpoint.Filename(checkpoint.NameArgs{Epoch: 43, Step: 32250, Metric: "mae", Score: -1.234567e-7, Scored: true}))
	// Output:
	// epoch-0006-step-4500-val_loss=0.0416831.safetensors
	// epoch-0006-step-4500.safetensors
	// epoch-0043-step-32250-mae=-1.23457e-07.safetensors
}

func ExampleParseFilename() {
	a, err := checkpoint.ParseFilename("epoch-0006-step-4500-val_loss=0.0416831.safetensors")
	fmt.Println(a.Epoch, a.Step, a.Metric, a.Score, a.Scored, err)
	// Output: 6 4500 val_loss 0.0416831 true <nil>
}

func ExampleSanitizeMetric() {
	fmt.Println(checkpoint.SanitizeMetric("val loss/top-1"))
	// Output: val_loss_top-1
}

func ExampleNewTopK() {
	dir, _ := os.MkdirTemp("", "run")
	defer os.RemoveAll(dir)
	tk, err := checkpoint.NewTopK(2, "val_loss", "min", dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for epoch, loss := range []float64{0.5, 0.4, 0.6, 0.3, 0.7} {
		if _, err := tk.Save(record(epoch+1, loss)); err != nil {
			fmt.Println(err)
			return
		}
	}
	latest, ok, _ := tk.Latest()
	r, _ := tk.Load(latest)
	fmt.Println(filepath.Base(latest), ok, r.Epoch)
	entries, _ := checkpoint.ReadManifest(dir)
	for _, e := range entries {
		fmt.Println(e.File)
	}
	// Output:
	// epoch-0005-step-3750-val_loss=0.7.safetensors true 5
	// epoch-0002-step-1500-val_loss=0.4.safetensors
	// epoch-0004-step-3000-val_loss=0.3.safetensors
	// epoch-0005-step-3750-val_loss=0.7.safetensors
}

func ExampleReadManifest() {
	dir, _ := os.MkdirTemp("", "run")
	defer os.RemoveAll(dir)
	entries, err := checkpoint.ReadManifest(dir) // no run wrote here yet: empty, not an error
	fmt.Println(len(entries), err)
	tk, _ := checkpoint.NewTopK(3, "val_loss", "min", dir, nil)
	tk.Save(record(1, 0.5))
	entries, _ = checkpoint.ReadManifest(dir)
	e := entries[0]
	fmt.Println(e.File, e.Epoch, e.Metric, *e.Score)
	// Output:
	// 0 <nil>
	// epoch-0001-step-750-val_loss=0.5.safetensors 1 val_loss 0.5
}

func ExampleNewEveryN() {
	fsys := checkpoint.NewMemFS()
	en, _ := checkpoint.NewEveryN(2, "/run", nil, checkpoint.WithFS(fsys))
	for epoch := 1; epoch <= 5; epoch++ {
		en.Save(record(epoch, 0.5))
	}
	names, _ := fsys.ReadDir("/run")
	fmt.Println(names)
	// Output: [epoch-0002-step-1500.safetensors epoch-0004-step-3000.safetensors epoch-0005-step-3750.safetensors manifest.json]
}

func ExampleNewMemory() {
	var c checkpoint.Checkpointer = checkpoint.NewMemory()
	path, _ := c.Save(record(2, 0.5))
	latest, ok, _ := c.Latest()
	r, _ := c.Load(latest)
	fmt.Println(path, ok, r.Epoch)
	// Output: mem:0/epoch-0002-step-1500.safetensors true 2
}

func ExampleNewMemFS() {
	fsys := checkpoint.NewMemFS()
	fsys.Fail(checkpoint.Fault{Op: checkpoint.OpSync, Match: "epoch-0002", Err: syscall.EIO})
	tk, _ := checkpoint.NewTopK(1, "val_loss", "min", "/run", nil,
		checkpoint.WithFS(fsys), checkpoint.WithIORetry(2, time.Millisecond))
	tk.Save(record(1, 0.5))
	_, err := tk.Save(record(2, 0.4))
	fmt.Println(err)
	entries, _ := fsys.ReadDir("/run")
	fmt.Println(entries)
	// Output:
	// checkpoint: write /run/epoch-0002-step-1500-val_loss=0.4.safetensors: fsync: fsync /run/.nitro-tmp-epoch-0002-step-1500-val_loss=0.4.safetensors.000006: input/output error
	// [epoch-0001-step-750-val_loss=0.5.safetensors manifest.json]
}

func ExampleWithIORetry() {
	fsys := checkpoint.NewMemFS()
	fsys.Fail(checkpoint.Fault{Op: checkpoint.OpRename, Err: syscall.EAGAIN, Count: 2}) // transient, twice
	tk, _ := checkpoint.NewTopK(1, "val_loss", "min", "/run", nil,
		checkpoint.WithFS(fsys), checkpoint.WithIORetry(3, time.Millisecond))
	path, err := tk.Save(record(1, 0.5))
	fmt.Println(path, err)
	// Output: /run/epoch-0001-step-750-val_loss=0.5.safetensors <nil>
}

// A run of 2 processes with batch 128 each (a global batch of 256) stopped after 7 global
// batches, sample 1792 of its epoch. Resumed on 1 process with batch 128, that sample starts
// batch 14; with a global batch of 384 no batch starts there, and the resume is refused.
func ExamplePosition_Rebatch() {
	p := checkpoint.Position{Epoch: 1, Batch: 7, GlobalBatch: 256, EpochBatches: 19}
	q, err := p.Rebatch(128, 39, 1)
	fmt.Println(q.Batch, q.Samples(), err)
	_, err = p.Rebatch(384, 13, 1)
	fmt.Println(err != nil)
	// Output:
	// 14 1792 <nil>
	// true
}
