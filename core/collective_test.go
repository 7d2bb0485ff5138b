package core_test

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/collective"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/prefetch"
)

// collectiveData is the synthetic task with batch rows per train batch: 64 train samples, 40
// val samples in batches of 8 (5 batches: one rank of 2 gets the extra one).
func collectiveData(t *testing.T, batch int) prefetch.Data {
	return prefetch.Data{
		"train": coretest.Arrays(t, 64, batch, 1, prefetch.ArrayOptions{DropPartial: true}),
		"val":   coretest.Arrays(t, 40, 8, 2, prefetch.ArrayOptions{}),
	}
}

// runRanks sets up and trains world Nitros, one per goroutine, as the ranks of one run over an
// in-memory collective; opts(r) adds rank r's options, and started, when given, sees each Nitro
// before it trains. It returns each rank's Nitro and error.
func runRanks(t *testing.T, world int, opts func(r int) []core.Option, started ...func(r int, n *core.Nitro)) ([]*core.Nitro, []error) {
	return runRanksOf(t, func() any { return &coretest.Reg{} }, world, opts, started...)
}

// runRanksOf is runRanks on the experiments mk makes.
func runRanksOf(t *testing.T, mk func() any, world int, opts func(r int) []core.Option, started ...func(r int, n *core.Nitro)) ([]*core.Nitro, []error) {
	return runRanksTo(t, mk, world, opts, (*core.Nitro).Train, started...)
}

// runRanksTo is runRanksOf with train, not Train, as each rank's verb (a TrainSteps call).
func runRanksTo(t *testing.T, mk func() any, world int, opts func(r int) []core.Option, train func(n *core.Nitro) error, started ...func(r int, n *core.Nitro)) ([]*core.Nitro, []error) {
	return runRanksOver(t, mk, world, func(r *collective.Rank) core.Collective { return r }, opts, train, started...)
}

// runRanksOver is runRanksTo with each rank's collective made by wrap from its in-memory rank.
func runRanksOver(t *testing.T, mk func() any, world int, wrap func(*collective.Rank) core.Collective, opts func(r int) []core.Option, train func(n *core.Nitro) error, started ...func(r int, n *core.Nitro)) ([]*core.Nitro, []error) {
	ranks, err := collective.Local(world)
	if err != nil {
		t.Fatal(err)
	}
	ns, errs := make([]*core.Nitro, world), make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			o := append(coretest.GoOpts(nil, core.WithDist(dist.Dist{Rank: r, WorldSize: world}), core.WithCollective(wrap(ranks[r]))), opts(r)...)
			n, err := core.New(mk(), o...)
			if err == nil {
				for _, f := range started {
					f(r, n)
				}
				err = train(n)
			}
			if err != nil {
				ranks[r].Leave(err) // as a process that exits: the others stop instead of waiting
			}
			ns[r], errs[r] = n, err
		})
	}
	wg.Wait()
	return ns, errs
}

// TrainMSE reports its batch's MSE as a train metric.
type TrainMSE struct{ coretest.Base }

func (*TrainMSE) TrainMetrics(out core.Outputs, in coretest.Tgt) map[string]*graph.Node {
	return map[string]*graph.Node{"mse": coretest.MSE(out["pred"], in.Y)}
}

// Two ranks of batch 8 summing their gradients train what one process trains on batch 16: the
// same parameters, train losses, train metrics and val metrics, on both ranks.
func TestCollectiveMatchesOneProcessOnTheGlobalBatch(t *testing.T) {
	ns := matchesOneProcess(t, func(r *collective.Rank) core.Collective { return r })
	if !strings.Contains(ns[1].ConfigReport(), "rank 1 of 2 (no launcher), gradients and validation summed over 2 processes (WithCollective)") {
		t.Errorf("config report:\n%s", ns[1].ConfigReport())
	}
}

// matchesOneProcess trains two ranks of batch 8 over the collectives wrap makes, and one process
// on batch 16, and checks that they agree (see TestCollectiveMatchesOneProcessOnTheGlobalBatch).
func matchesOneProcess(t *testing.T, wrap func(*collective.Rank) core.Collective) []*core.Nitro {
	ref := coretest.MustNew(t, &TrainMSE{}, collectiveData(t, 16), core.WithMaxEpochs(3))
	coretest.Train(t, ref)
	ns, errs := runRanksOver(t, func() any { return &TrainMSE{} }, 2, wrap, func(int) []core.Option {
		return []core.Option{core.WithData(collectiveData(t, 8)), core.WithMaxEpochs(3)}
	}, (*core.Nitro).Train)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	want, err := ref.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	for r, n := range ns {
		if n.Step() != ref.Step() {
			t.Errorf("rank %d took %d steps, one process %d", r, n.Step(), ref.Step())
		}
		got, err := n.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			a, b := tensors.MustCopyFlatData[float32](got[name]), tensors.MustCopyFlatData[float32](w)
			for i := range b {
				if math.Abs(float64(a[i]-b[i])) > 1e-5 {
					t.Errorf("rank %d: %s[%d] = %g, one process %g", r, name, i, a[i], b[i])
				}
			}
		}
		for e, h := range n.History() {
			rh := ref.History()[e]
			if math.Abs(h.TrainLoss-rh.TrainLoss) > 1e-5 || math.Abs(h.Train["mse"]-rh.Train["mse"]) > 1e-5 || rh.Train["mse"] == 0 {
				t.Errorf("rank %d epoch %d: train loss %g, mse %g; one process %g, %g", r, e+1, h.TrainLoss, h.Train["mse"], rh.TrainLoss, rh.Train["mse"])
			}
			if v0 := ns[0].History()[e].Val["val_loss"]; h.Val["val_loss"] != v0 || math.Abs(v0-rh.Val["val_loss"]) > 1e-5 {
				t.Errorf("rank %d epoch %d: val_loss %g, rank 0 %g, one process %g", r, e+1, h.Val["val_loss"], v0, rh.Val["val_loss"])
			}
		}
	}
	return ns
}

// Ranks set up differently are refused before the first step, on every rank, naming the first
// differing field and both values.
func TestCollectiveRefusesRanksThatDisagree(t *testing.T) {
	ns, errs := runRanks(t, 2, func(r int) []core.Option {
		return []core.Option{core.WithData(collectiveData(t, 8)), core.WithMaxEpochs(2 + r)}
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "max_epochs is 2 on rank 0 and 3 on rank 1") {
			t.Errorf("rank %d: %v", r, err)
		}
		if ns[r] != nil && ns[r].Step() != 0 {
			t.Errorf("rank %d took %d steps", r, ns[r].Step())
		}
	}
}

// The fused step has no point between the gradients and the update: refused, naming it.
func TestCollectiveRefusesTheFusedStep(t *testing.T) {
	_, errs := runRanks(t, 2, func(int) []core.Option {
		return []core.Option{core.WithData(collectiveData(t, 8)), core.WithFusedStep()}
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "WithFusedStep") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// A collective that is not the Dist's is refused.
	ranks, _ := collective.Local(2)
	_, err := core.New(&coretest.Reg{}, coretest.GoOpts(nil, core.WithData(collectiveData(t, 8)), core.WithCollective(ranks[1]))...)
	coretest.WantErr(t, err, "WithCollective: the collective is rank 1 of 2, WithDist says rank 0 of 1")
	// Independent ranks asked for beside a collective would silently train one model: refused.
	_, err = core.New(&coretest.Reg{}, coretest.GoOpts(nil, core.WithData(collectiveData(t, 8)), core.WithCollective(ranks[1]),
		core.WithDist(dist.Dist{Rank: 1, WorldSize: 2}), core.WithIndependentRanks())...)
	coretest.WantErr(t, err, "WithIndependentRanks (--independent-ranks) with a collective over 2 processes", "drop one of them")
}

// interrupting is a train source that interrupts its Nitro when batch at is read: an Interrupt
// reaching one rank only.
type interrupting struct {
	prefetch.Source
	at int
	n  *core.Nitro // set before Train
}

func (s *interrupting) BatchAt(i int) (prefetch.Batch, error) {
	if i == s.at {
		s.n.Interrupt()
	}
	return s.Source.BatchAt(i)
}

func (s *interrupting) DropsPartial() bool { return true }

// An Interrupt on rank 1 alone stops both ranks at the same step boundary (the step's vote),
// after which both validate and stop as requested: neither waits for the other.
func TestCollectiveInterruptStopsEveryRankAtOneStep(t *testing.T) {
	src := &interrupting{Source: coretest.Arrays(t, 64, 8, 1, prefetch.ArrayOptions{DropPartial: true}), at: 5}
	ns, errs := runRanks(t, 2, func(r int) []core.Option {
		d := collectiveData(t, 8)
		if r == 1 {
			d["train"] = src
		}
		return []core.Option{core.WithData(d), core.WithMaxEpochs(3)}
	}, func(r int, n *core.Nitro) {
		if r == 1 {
			src.n = n
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if ns[0].Step() != ns[1].Step() || ns[0].Step() >= 12 || ns[0].StopReason() != core.StopRequested || ns[1].StopReason() != core.StopRequested {
		t.Errorf("rank 0 stopped at step %d (%s), rank 1 at %d (%s); want one step before the end, requested on both",
			ns[0].Step(), ns[0].StopReason(), ns[1].Step(), ns[1].StopReason())
	}
}
