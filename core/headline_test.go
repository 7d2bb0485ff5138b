package core_test

import (
	"slices"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
)

// Family reports a numbered family (err_0, err_1, err_2) beside mse and sse.
type Family struct{ Rows }

func (e *Family) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	m := e.Rows.Metrics(out, in)
	for _, k := range []string{"err_0", "err_1", "err_2"} {
		m[k] = m["mse"]
	}
	return m
}

// Headlined declares its headline.
type Headlined struct {
	Family
	names []string
}

func (e *Headlined) Headline() []string { return e.names }

// TestHeadline: the epoch line's metrics are the ranking metric and a few others, numbered
// families left out (every metric stays in EpochResult.Val and the record); a declared Headline
// is shown as declared, and a name the epoch does not report stops Train, naming it.
func TestHeadline(t *testing.T) {
	run := func(e any) ([]core.EpochResult, error) {
		con := &core.MemoryConsole{}
		n, err := core.New(e, core.WithBackend("go"), core.WithConsole(con), core.WithoutLogger(), core.WithoutCheckpoints(),
			core.WithData(coretest.Data(t, 32)), core.WithMaxEpochs(1))
		if err != nil {
			t.Fatal(err)
		}
		err = n.Train()
		return con.Epochs, err
	}
	eps, err := run(&Family{})
	if err != nil {
		t.Fatal(err)
	}
	r := eps[0]
	if want := []string{"val_mse", "val_rows", "val_sse"}; !slices.Equal(r.Headline, want) {
		t.Errorf("default headline %v, want %v (no numbered family)", r.Headline, want)
	}
	if _, ok := r.Val["val_err_2"]; !ok {
		t.Errorf("the family left EpochResult.Val: %v", r.Val)
	}
	if hv := r.HeadlineValues(); len(hv) != 3 || hv[0].Value != r.Val["val_mse"] {
		t.Errorf("HeadlineValues %v, want val_mse = %v first", hv, r.Val["val_mse"])
	}
	eps, err = run(&Headlined{names: []string{"val_err_1", "val_mse"}})
	if err != nil || !slices.Equal(eps[0].Headline, []string{"val_err_1", "val_mse"}) {
		t.Errorf("declared headline: %v, %v", eps, err)
	}
	_, err = run(&Headlined{names: []string{"val_accuracy"}})
	coretest.WantErr(t, err, `Headline() of`, `names "val_accuracy", which epoch 1 did not report`, "val_err_0", "val_mse")
}
