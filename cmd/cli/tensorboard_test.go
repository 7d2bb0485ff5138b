package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/plot"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/tblog"
)

// tensorBoardView is what tblog's testdata/read_events.py prints: what TensorBoard shows of a folder.
type tensorBoardView struct {
	Files   map[string]struct{ Records int } `json:"files"`
	Scalars map[string][][2]float64          `json:"scalars"` // tag -> [step, value]
	Text    map[string][][2]any              `json:"text"`    // tag -> [step, text]
}

// TestTrainTensorBoard: nitro train --tensorboard writes <run dir>/tb beside the JSON Lines record,
// and TensorBoard's own reader ($NITRO_TENSORBOARD_PYTHON) reads there what the record holds: each
// train loss at its step (as a float32), the epoch's validation, the params and the final status.
// Without the flag no tb/ is written.
// Run alone: NITRO_TENSORBOARD_PYTHON=$PWD/.nitro/tb-venv/bin/python go test -run TestTrainTensorBoard ./cmd/cli/
func TestTrainTensorBoard(t *testing.T) {
	py := prereq.TensorBoardPython.Interpreter(t, "NITRO_TENSORBOARD_PYTHON")
	t.Cleanup(compilecache.Default().Reset)
	dir := t.TempDir()
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=200",
		"--max-epochs", "1", "--run-dir", dir, "--no-progress", "--no-checkpoints", "--tensorboard")
	if code != 0 {
		t.Fatalf("train --tensorboard: exit %d: %s\n%s", code, errs, out)
	}
	tb := filepath.Join(dir, tblog.DirName)
	if !strings.Contains(out, "\ntensorboard: "+tb+"\n") {
		t.Errorf("the output does not name the event folder %s:\n%s", tb, out)
	}
	record, err := plot.Read(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatalf("the JSON Lines record beside the events: %v", err)
	}

	got, err := exec.Command(py, "../../tblog/testdata/read_events.py", tb).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		prereq.TensorBoardPython.Broken(t, err)
	}
	var view tensorBoardView
	if err := json.Unmarshal(got, &view); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if len(view.Files) != 1 {
		t.Errorf("TensorBoard read files %v, want the run's one", view.Files)
	}
	for tag, points := range map[string][]plot.Point{"train/loss": record.Train["loss"], "val/val_loss": record.Validate["val_loss"], "val/val_accuracy": record.Validate["val_accuracy"]} {
		if len(points) == 0 || len(view.Scalars[tag]) != len(points) {
			t.Errorf("%s: TensorBoard read %d points, the record holds %d", tag, len(view.Scalars[tag]), len(points))
			continue
		}
		for i, p := range points {
			step := p.X // a train point's X is its step, an epoch's is its number: TensorBoard's x is the step it ended at
			if !strings.HasPrefix(tag, "train/") {
				step = float64(epochEnd(record, int(p.X)))
			}
			if want := [2]float64{step, float64(float32(p.Y))}; view.Scalars[tag][i] != want {
				t.Errorf("%s[%d]: TensorBoard read %v, the record holds %v", tag, i, view.Scalars[tag][i], want)
				break
			}
		}
	}
	if params := view.Text[tblog.TagParams]; len(params) != 1 || !strings.Contains(params[0][1].(string), "| Hidden |") {
		t.Errorf("params as TensorBoard reads them: %v", params)
	}
	if status := view.Text[tblog.TagStatus]; len(status) != 1 || status[0][1] != "completed" {
		t.Errorf("status as TensorBoard reads it: %v, want completed", status)
	}

	plain := t.TempDir()
	if code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=200",
		"--max-epochs", "1", "--run-dir", plain, "--no-progress", "--no-checkpoints"); code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	if _, err := os.Stat(filepath.Join(plain, tblog.DirName)); !os.IsNotExist(err) {
		t.Errorf("train without --tensorboard: %s/%s: %v, want none", plain, tblog.DirName, err)
	}
}

// epochEnd is the step the record's epoch ended at.
func epochEnd(run *plot.Run, epoch int) int {
	for _, e := range run.EpochEnds {
		if e.Epoch == epoch {
			return e.Step
		}
	}
	return -1
}
