package exportbundle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/pjrt"
)

func affineSoftmax(x, w, b *graph.Node) *graph.Node {
	return graph.Softmax(graph.Add(graph.Dot(x, w), graph.InsertAxes(b, 0)))
}

// TestCaptureRunsWithGopjrtAlone captures softmax(x@w+b) through the interposer while an ordinary GoMLX
// backend on the same plugin is alive, then compiles and runs the captured text with gopjrt
// alone and compares it with GoMLX's own execution.
func TestCaptureRunsWithGopjrtAlone(t *testing.T) {
	plugin := requirePlugin(t)
	ref := gomlxBackend(t) // the main backend exists first: the interposer shares its plugin
	x := mlpInput(2, 3)
	ws := mlpWeights()
	w, b := ws[0].Tensor, ws[1].Tensor // [4,8] and [8]

	want, err := graph.ExecOnce(ref, affineSoftmax, gomlxTensor(x), gomlxTensor(w), gomlxTensor(b))
	if err != nil {
		t.Fatal(err)
	}
	var viaShim []float32
	progs, err := Capture(plugin, func(be backends.Backend) error {
		out, err := graph.ExecOnce(be, affineSoftmax, gomlxTensor(x), gomlxTensor(w), gomlxTensor(b))
		if err != nil {
			return err
		}
		viaShim = flatF32(out)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(progs) != 1 {
		t.Fatalf("%d programs captured, want 1", len(progs))
	}
	p := progs[0]
	lines := strings.SplitN(string(p.Code), "\n", 4)
	t.Logf("captured format %q, %d bytes; first lines:\n%s", p.Format, len(p.Code), strings.Join(lines[:min(3, len(lines))], "\n"))
	if p.Format != "mlir" || !strings.HasPrefix(string(p.Code), "module @") {
		t.Fatalf("captured %q program starting %q, want StableHLO text", p.Format, lines[0])
	}

	// gopjrt alone: plugin -> client -> compile the text -> execute.
	pl, err := pjrt.GetPlugin(plugin)
	if err != nil {
		t.Fatal(err)
	}
	client, err := pl.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	exec, err := client.Compile().WithStableHLO(p.Code).Done()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	var args []*pjrt.Buffer
	for _, in := range []Tensor{x, w, b} {
		buf, err := toDevice(client, in)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Destroy()
		args = append(args, buf)
	}
	outs, err := exec.Execute(args...).Done()
	if err != nil {
		t.Fatal(err)
	}
	got, err := fromDevice(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	gotF, _ := Values[float32](got)
	for name, ref := range map[string][]float32{"GoMLX (main backend)": flatF32(want), "GoMLX (interposer backend)": viaShim} {
		d, err := maxAbsDiff(gotF, ref)
		if err != nil || d > 1e-6 {
			t.Errorf("gopjrt-alone output vs %s: max |diff| %g (%v)", name, d, err)
		}
	}
}

func TestCaptureErrors(t *testing.T) {
	plugin := requirePlugin(t)
	ok := func(b backends.Backend) error { return nil }
	if _, err := Capture(plugin, nil); err == nil {
		t.Error("nil build: no error")
	}
	if _, err := Capture(filepath.Join(t.TempDir(), "absent.so"), ok); err == nil {
		t.Error("absent plugin: no error")
	}
	sentinel := errors.New("build failed")
	if _, err := Capture(plugin, func(backends.Backend) error { return sentinel }); !errors.Is(err, sentinel) {
		t.Errorf("build error: got %v", err)
	}
	_, err := Capture(plugin, func(b backends.Backend) error {
		graph.MustExecOnce(b, func(x *graph.Node) *graph.Node { return graph.Reshape(x, 7) }, []float32{1, 2, 3})
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panicking build: got %v", err)
	}
	// A build that compiles nothing captures nothing.
	if progs, err := Capture(plugin, ok); err != nil || len(progs) != 0 {
		t.Errorf("empty build: %d programs, %v", len(progs), err)
	}
	// A file that is not a plugin is refused by the interposer, naming it.
	other := filepath.Join(t.TempDir(), "pjrt_c_api_other_plugin.so")
	if err := os.WriteFile(other, []byte("not a plugin"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Capture(other, ok); err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("a file that is not a plugin: got %v", err)
	}
	// A symlink to the bound plugin is the same plugin.
	link := filepath.Join(t.TempDir(), pluginFile)
	if err := os.Symlink(plugin, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Capture(link, ok); err != nil {
		t.Errorf("symlink to the bound plugin: %v", err)
	}
}
