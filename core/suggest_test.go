package core_test

import (
	"os"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// RowsSuggested is Rows with the Checkpointer the checkpoint-metric error suggests for Rows,
// pasted as printed (TestCheckpointMetricSuggestionCompiles checks it is verbatim): it compiles
// here and the run it configures ranks by the metric suggested.
type RowsSuggested struct{ Rows }

func (e *RowsSuggested) Checkpointer() checkpoint.Checkpointer {
	tk, err := checkpoint.NewTopK(3, "val_mse", "min", "", nil)
	if err != nil {
		panic(err) // New reports it as a setup error
	}
	return tk
}

// suggestedHook is the experiment-level hook printed in a checkpoint-metric error, as Go source.
func suggestedHook(t *testing.T, err error, typeName string) string {
	t.Helper()
	msg := err.Error()
	start := strings.Index(msg, "\tfunc (e *"+typeName+") Checkpointer() checkpoint.Checkpointer {")
	end := strings.Index(msg[max(start, 0):], "\n\t}\n")
	if start < 0 || end < 0 {
		t.Fatalf("error %q: no Checkpointer hook for %s in it", msg, typeName)
	}
	var lines []string
	for _, l := range strings.Split(msg[start:start+end+len("\n\t}")], "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	return strings.Join(lines, "\n")
}

// TestCheckpointMetricSuggestionCompiles: a default checkpointer ranking by a metric the val
// split does not report is refused with the experiment-level Checkpointer hook first, its code
// exactly what RowsSuggested compiles, with a mode that fits the metric (min for an error), then
// the one-run option and the way to turn checkpoints off.
func TestCheckpointMetricSuggestionCompiles(t *testing.T) {
	_, err := core.New(&Rows{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)))...)
	coretest.WantErr(t, err, `checkpoint metric "val_loss" (the default checkpointer, TopK by val_loss)`, "it reports val_mse, val_rows, val_sse",
		"in the experiment, so every run of it checkpoints the same way",
		`or for one run, tk, err := checkpoint.NewTopK(3, "val_mse", "min", "", nil), then core.WithCheckpointer(tk)`, "core.WithoutCheckpoints()")
	if strings.Contains(err.Error(), `"max"`) {
		t.Errorf("error %q suggests max for an error metric", err)
	}
	hook := strings.Replace(suggestedHook(t, err, "Rows"), "(e *Rows)", "(e *RowsSuggested)", 1)
	src, rerr := os.ReadFile("suggest_test.go")
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.Contains(string(src), hook) {
		t.Fatalf("the suggested hook is not RowsSuggested's compiled method verbatim:\n%s", hook)
	}
	// And the pasted hook does what it says.
	dir := t.TempDir()
	coretest.Train(t, coretest.New(t, &RowsSuggested{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)))...))
	if tk, ok := coretest.New(t, &RowsSuggested{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)))...).Checkpointer().(*checkpoint.TopK); !ok || tk.Metric() != "val_mse" || tk.Mode() != "min" {
		t.Errorf("the suggested hook's checkpointer: %+v", tk)
	}
	if e, _ := checkpoint.ReadManifest(dir); len(e) != 1 || e[0].Metric != "val_mse" || e[0].Score == nil {
		t.Errorf("manifest %+v: want one checkpoint scored by val_mse", e)
	}
}

// RanksMissing's own Checkpointer ranks by a metric Rows does not report.
type RanksMissing struct{ Rows }

func (*RanksMissing) Checkpointer() checkpoint.Checkpointer {
	return must(checkpoint.NewTopK(1, "val_accuracy", "max", "", nil))
}

// TestCheckpointMetricErrorNamesItsSource: the error says where the ranking metric came from,
// the experiment's hook or the run's option, and what to change there.
func TestCheckpointMetricErrorNamesItsSource(t *testing.T) {
	_, err := core.New(&RanksMissing{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)))...)
	coretest.WantErr(t, err, `checkpoint metric "val_accuracy" (from RanksMissing.Checkpointer())`, "Rank by one of them in the hook",
		"func (e *RanksMissing) Checkpointer() checkpoint.Checkpointer {", `checkpoint.NewTopK(3, "val_mse", "min", "", nil)`)
	_, err = core.New(&Rows{}, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithCheckpointer(must(checkpoint.NewTopK(3, "val_mae", "min", "", nil))))...)
	coretest.WantErr(t, err, `checkpoint metric "val_mae" (from WithCheckpointer)`,
		`Rank by one of them: tk, err := checkpoint.NewTopK(3, "val_mse", "min", "", nil), then core.WithCheckpointer(tk)`, "func (e *Rows) Checkpointer()")
}
