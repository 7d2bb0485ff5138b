package logjson_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nitro-go/nitro/logjson"
)

// FormatText: no timestamp, no level for info, "warning: " / "error: " otherwise, the message as
// it is, then "  key value" pairs (With fields first, each group sorted by key), floats with four
// decimals and non-finite ones as their text.
func TestFormatTextReadsLikePlainText(t *testing.T) {
	var buf bytes.Buffer
	z, err := logjson.NewDiagnostics(&buf, logjson.FormatText)
	must(t, err)
	z.Debug("hidden")
	z.Info("config report\n  width 128")
	z.Info("epoch 2/5", zap.Float64("train_loss", 0.123456), zap.Float64("val_loss", math.NaN()), zap.Duration("took", 1500*time.Millisecond))
	w := z.With(zap.String("run", "r1"), zap.Int("attempt", 2))
	w.Warn("slow step", zap.Float32("seconds", 2.5))
	z.Error("monitor failed", zap.String("monitor", "phase"))
	want := "config report\n  width 128\n" +
		"epoch 2/5  train_loss 0.1235  val_loss NaN  took 1.5s\n" +
		"warning: slow step  attempt 2  run r1  seconds 2.5000\n" +
		"error: monitor failed  monitor phase\n"
	if got := buf.String(); got != want {
		t.Errorf("text format:\n got %q\nwant %q", got, want)
	}
	// The encoder alone, for a core of the caller's own, writes the same.
	buf.Reset()
	zap.New(zapcore.NewCore(logjson.NewTextEncoder(), zapcore.AddSync(&buf), zapcore.InfoLevel)).Info("stopped", zap.String("reason", "early stop"))
	if got := buf.String(); got != "stopped  reason early stop\n" {
		t.Errorf("NewTextEncoder: %q", got)
	}
}
