package integration_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

func TestZZBaselinePredict(t *testing.T) {
	out := os.Getenv("BASELINE_OUT")
	if out == "" {
		t.Skip()
	}
	var b strings.Builder
	dump := func(what string, p core.Prediction) {
		names := make([]string, 0, len(p))
		for k := range p {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			var h [32]byte
			p[k].ConstBytes(func(d []byte) { h = sha256.Sum256(d) })
			fmt.Fprintf(&b, "%s %s %v %x\n", what, k, p[k].Shape(), h)
		}
	}
	for _, backend := range []string{"xla", "go"} {
		for _, e := range []any{newClf(t, nil), &ClfMetrics{Width: 16, MaxEpochs: 1, LearningRate: 0.01, TrainN: 256, ValN: 100, Batch: 32}} {
			n, err := core.New(e, core.WithBackend(backend), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()))
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			if _, err := n.Validate(); err != nil {
				t.Fatal(err)
			}
			tag := fmt.Sprintf("%s/%T", backend, e)
			for _, w := range []int{32, 4, 7} {
				x, _ := synthetic(w, 9)
				dump(fmt.Sprintf("%s/predict%d", tag, w), must(n.Predict(core.Batch{"x": x})))
			}
			x, y := synthetic(100, 2)
			src, _ := core.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 32, core.ArrayOptions{})
			i := 0
			for p, err := range n.PredictAll(src) {
				if err != nil {
					t.Fatal(err)
				}
				dump(fmt.Sprintf("%s/all%d", tag, i), p)
				i++
			}
			t.Logf("%s cache %+v", tag, n.Uploads())
		}
	}
	os.WriteFile(out, []byte(b.String()), 0o644)
}
