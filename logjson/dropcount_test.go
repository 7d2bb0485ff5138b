package logjson_test

import (
	"math"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/logjson"
)

// TestCountDropped: a caller that drops non-finite values before LogMetrics (as the contract
// asks) hands the count over through DropCounter, and the JSON logger's finish line reports it
// together with what it dropped itself; Memory counts it and Multi passes it on.
func TestCountDropped(t *testing.T) {
	l, path := newLogger(t)
	mem := &logjson.Memory{}
	var lg logjson.Logger = logjson.Multi(l, mem, logjson.NewZap(nil)) // zap: no DropCounter, skipped
	values := map[string]float64{"loss": 0.5, "grad_norm": math.NaN(), "ratio": math.Inf(1)}
	kept, dropped := logjson.DropNonFinite(values)
	if dropped != 2 {
		t.Fatalf("DropNonFinite dropped %d, want 2", dropped)
	}
	dc, ok := lg.(logjson.DropCounter)
	if !ok {
		t.Fatal("Multi is not a DropCounter")
	}
	dc.CountDropped(dropped)
	dc.CountDropped(0)
	dc.CountDropped(-3) // ignored
	must(t, lg.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: logjson.ContextTrain, Values: kept}))
	// A value that still reaches the JSON logger is dropped and counted there too.
	must(t, l.LogMetrics(logjson.Metrics{Step: 2, Epoch: 1, Context: logjson.ContextTrain, Values: map[string]float64{"loss": math.NaN()}}))
	must(t, lg.Finish(logjson.StatusCompleted))
	l.CountDropped(5) // after Finish: ignored
	if l.Dropped() != 3 || mem.Dropped() != 2 {
		t.Errorf("JSONLogger.Dropped %d, Memory.Dropped %d; want 3 and 2", l.Dropped(), mem.Dropped())
	}
	lines := strings.Split(strings.TrimSpace(string(readFile(t, path))), "\n")
	if got, want := lines[len(lines)-1], `{"type":"finish","status":"completed","dropped_non_finite":3}`; got != want {
		t.Errorf("finish line %s, want %s", got, want)
	}
	for _, c := range mem.Calls() {
		if c.Verb != "metrics" && c.Verb != "finish" {
			t.Errorf("CountDropped was recorded as a call: %+v", c)
		}
	}
}
