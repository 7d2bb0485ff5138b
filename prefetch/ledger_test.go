package prefetch

import (
	"strings"
	"testing"
)

// The exactly-once ledger: the pipeline cannot be made to drop or duplicate a batch from outside,
// so the check is exercised directly.
func TestLedger(t *testing.T) {
	l := newLedger(2, 6)
	for _, i := range []int{3, 2, 5} {
		if err := l.mark(i, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{l.mark(3, 1), "epoch 1: batch 3 delivered twice: exactly-once check failed"},
		{l.mark(6, 1), "delivered batch 6 outside [2, 6)"},
		{l.mark(1, 1), "delivered batch 1 outside [2, 6)"},
		{l.complete(1), "epoch 1: 1 of 4 batches never delivered (first: [4])"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v; want %q", c.err, c.want)
		}
	}
	if err := l.mark(4, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.complete(1); err != nil {
		t.Errorf("complete after every index: %v", err)
	}
	empty := newLedger(0, 0)
	if err := empty.complete(0); err != nil {
		t.Errorf("empty range: %v", err)
	}
}
