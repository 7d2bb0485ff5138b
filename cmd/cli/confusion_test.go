package cli_test

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTinyMNISTConfusion: training logs one confusion line per epoch (the val split's matrix,
// labels 0-9, the epoch it was evaluated in), whose rows agree with the per-digit accuracies of
// the same epoch's validate line; train and evaluate print the test split's matrix after its
// metrics; nitro plot draws it as confusion.png.
func TestTinyMNISTConfusion(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=3000", "--set", "TestLimit=1000", "--run-dir", dir, "--no-progress")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type confusionLine struct {
		Epoch  int
		Labels []string
		Matrix [][]int
	}
	var confusions []confusionLine
	validate := map[int]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		switch {
		case line["type"] == "confusion":
			var one confusionLine
			if err := json.Unmarshal(sc.Bytes(), &one); err != nil {
				t.Fatal(err)
			}
			confusions = append(confusions, one)
		case line["type"] == "metrics" && line["context"] == "validate":
			validate[int(line["epoch"].(float64))] = line
		}
	}
	if len(confusions) != 2 || confusions[0].Epoch != 1 || confusions[1].Epoch != 2 {
		t.Fatalf("confusion lines %+v; want one for each of epochs 1 and 2", confusions)
	}
	for _, c := range confusions {
		if strings.Join(c.Labels, "") != "0123456789" || len(c.Matrix) != 10 {
			t.Fatalf("epoch %d: labels %v, %d rows; want the ten digits", c.Epoch, c.Labels, len(c.Matrix))
		}
		total := 0
		for d, row := range c.Matrix {
			n := 0
			for _, v := range row {
				n += v
			}
			total += n
			want := float64(row[d]) / float64(n)
			got, _ := validate[c.Epoch]["val_accuracy_"+strconv.Itoa(d)].(float64)
			if math.Abs(got-want) > 1e-12 {
				t.Errorf("epoch %d: val_accuracy_%d = %v, the matrix's row gives %v", c.Epoch, d, got, want)
			}
		}
		if total != 1000 { // the tiny preset's ValSize
			t.Errorf("epoch %d: the matrix counts %d examples, want the val split's 1000", c.Epoch, total)
		}
	}
	table := out[strings.Index(out, "test confusion matrix"):]
	if !strings.Contains(out, " test_accuracy_9 ") || !strings.HasPrefix(table, "test confusion matrix (rows: true class, columns: predicted):\n      0   1") {
		t.Fatalf("train did not print the test metrics per digit and the matrix:\n%s", out)
	}
	table = table[:strings.Index(table, "\nin-process compile cache")]
	code, eout, errs := runCLI("evaluate", "mnist-mlp", "--preset", "tiny", "--set", "TestLimit=1000", "--checkpoint", dir, "--quiet")
	if code != 0 {
		t.Fatalf("evaluate: exit %d: %s\n%s", code, errs, eout)
	}
	if !strings.Contains(eout, table) {
		t.Errorf("evaluate's matrix differs from train's test matrix (same weights):\n%s\nwant\n%s", eout, table)
	}
	code, pout, errs := runCLI("plot", dir)
	if code != 0 || !strings.Contains(pout, filepath.Join(dir, "plots", "confusion.png")) {
		t.Fatalf("plot: exit %d: %s\n%s", code, errs, pout)
	}
}
