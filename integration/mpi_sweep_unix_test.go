//go:build unix

package integration_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/nitro-go/nitro/sweep"
)

// TestMPISweepPrunesOnEveryRank: `mpirun -np 2 nitro sweep ... --prune asha` trains each trial
// over both ranks; rank 0 keeps the one record, and a trial it prunes stops on rank 1 at the same
// step (rank 1 runs no pruner of its own: the stop is rank 0's, agreed at the validation). Every
// trial rank 0 records, rank 1 trained, in order.
func TestMPISweepPrunesOnEveryRank(t *testing.T) {
	m := newMPIRun(t)
	ctx, dir := m.run(t)
	args := append(slices.Clone(mpirunArgs), "-np", "2", m.bin, "sweep", "mnist-mlp", "--preset", "tiny",
		"--set", "TrainLimit=3000", "--set", "ValSize=1000", "--max-epochs", "4", "--trials", "5", "--sampler", "random",
		"--prune", "asha", "--param", "LearningRate=loguniform:1e-5,1", "--sweep-dir", dir)
	out, err := m.command(ctx, m.mpirun, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, tail(out))
	}
	st, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Trials) != 5 {
		t.Fatalf("%d trials recorded, want 5\n%s", len(st.Trials), tail(out))
	}
	// rank 1's "rank 1: trial N ended at step S (reason)" lines.
	rank1 := map[int]string{}
	for _, g := range regexp.MustCompile(`(?m)^\[\d+,1\]<stdout>:rank 1: trial (\d+) ended at step (\d+) \((\w+)\)`).FindAllSubmatch(out, -1) {
		n, _ := strconv.Atoi(string(g[1]))
		rank1[n] = string(g[2]) + " " + string(g[3])
	}
	pruned := 0
	for _, tr := range st.Trials {
		steps, _ := tr.Attrs["steps"].(float64)
		reason, _ := tr.Attrs["stop_reason"].(string)
		if tr.State == sweep.Pruned {
			pruned++
		}
		if want := fmt.Sprintf("%d %s", int(steps), reason); rank1[tr.Number] != want {
			t.Errorf("trial %d (%s): rank 0 stopped at step %d (%s), rank 1 %q", tr.Number, tr.State, int(steps), reason, rank1[tr.Number])
		}
	}
	if pruned == 0 {
		t.Errorf("no trial of 5 was pruned (learning rates from 1e-5 to 1): the test proves nothing\n%s", tail(out))
	}
	t.Logf("%d of 5 trials pruned, each at the same step on both ranks", pruned)
}
