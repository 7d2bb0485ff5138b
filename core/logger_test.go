package core_test

import (
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core"
)

func TestLoggerReceivesReportsAndEpochMetrics(t *testing.T) {
	lg := &core.MemoryLogger{}
	n := mustNew(t, &Reg{}, data(t, 32), core.WithMaxEpochs(2), core.WithLogger(lg))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	br, ok := lg.Other["binding_report"].(string)
	if !ok || !strings.Contains(br, "group default") || br != n.BindingReport() {
		t.Fatalf("binding_report not handed to the logger as the Nitro's report: %q", br)
	}
	if _, ok := lg.Other["config_report"]; !ok {
		t.Fatal("config_report not logged")
	}
	if len(lg.Metrics) != 2 {
		t.Fatalf("want one metrics record per epoch, got %d", len(lg.Metrics))
	}
	last := lg.Metrics[1]
	if last.Epoch != 2 || last.Step != 8 {
		t.Fatalf("last record at epoch %d step %d, want epoch 2 step 8", last.Epoch, last.Step)
	}
	if _, ok := last.Metrics["val_loss"]; !ok {
		t.Fatalf("val_loss missing from %v", last.Metrics)
	}
	if lg.Metrics[1].Metrics["train_loss"] >= lg.Metrics[0].Metrics["train_loss"] {
		t.Fatalf("train loss did not fall: %v", lg.Metrics)
	}
}
