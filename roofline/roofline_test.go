package roofline_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/roofline"
)

// Measure times real products: a positive rate over at least 3 calls and the window asked for,
// and a rate that agrees with the calls it counted; a side below 1 is refused by name.
func TestMeasureTimesTheProduct(t *testing.T) {
	be, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := roofline.Measure(be, dtypes.Float32, 64, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.Calls < 3 || p.Window < 20*time.Millisecond || !(p.FLOPs > 0) {
		t.Fatalf("peak %+v: want >= 3 calls over >= 20ms at a positive rate", p)
	}
	if want := 2 * 64.0 * 64 * 64 * float64(p.Calls) / p.Window.Seconds(); math.Abs(p.FLOPs-want) > 1e-6*want {
		t.Errorf("rate %g, calls over the window give %g", p.FLOPs, want)
	}
	if !strings.Contains(p.String(), "GFLOP/s (Float32 64² matmul)") {
		t.Errorf("String() = %q", p.String())
	}
	if _, err := roofline.Measure(be, dtypes.Float32, 0, time.Millisecond); err == nil || !strings.Contains(err.Error(), "matrix side 0") {
		t.Errorf("side 0: %v, want an error naming the side", err)
	}
}

// Cached measures once per backend and dtype: the second call returns the first's figure.
func TestCachedMeasuresOnce(t *testing.T) {
	be, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	a, err := roofline.Cached(be, dtypes.Float32, 32)
	if err != nil {
		t.Fatal(err)
	}
	b, err := roofline.Cached(be, dtypes.Float32, 32)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("two cached measurements differ: %+v and %+v", a, b)
	}
}

// Utilization divides by every device's peak; nothing measured gives 0, not a division by 0.
func TestUtilization(t *testing.T) {
	p := roofline.Peak{FLOPs: 100e9}
	if got := roofline.Utilization(50e9, p, 2); got != 0.25 {
		t.Errorf("50 GFLOP/s on 2 devices of 100: %v, want 0.25", got)
	}
	if got := roofline.Utilization(50e9, roofline.Peak{}, 1); got != 0 {
		t.Errorf("no peak: %v, want 0", got)
	}
	// GPT-2 small's shape over bytes: 85,054,464 weights in the blocks and the 256-byte embedding
	// a token passes through, 12 layers of width 768 over 1024 positions.
	if got, want := roofline.TransformerFLOPsPerToken(85_054_464, 12, 768, 1024), 6*85_054_464.0+12*12*768*1024.0; got != want {
		t.Errorf("TransformerFLOPsPerToken = %v, want %v", got, want)
	}
}
