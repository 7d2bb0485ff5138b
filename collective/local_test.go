package collective

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// each runs fn on every rank, each in its own goroutine, and returns their errors by rank.
func each(ranks []*Rank, fn func(r *Rank) error) []error {
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Go(func() { errs[i] = fn(r) })
	}
	wg.Wait()
	return errs
}

func TestAllReduceSumsOnEveryRank(t *testing.T) {
	ranks, err := Local(4)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]float32, 4)
	got64 := make([][]float64, 4)
	for step := range 3 { // the buffers and the scratch are reused from call to call
		errs := each(ranks, func(r *Rank) error {
			k := float32(r.Rank() + 1)
			got[r.Rank()] = []float32{k, 10 * k, float32(step)}
			if err := r.AllReduceSum(got[r.Rank()]); err != nil {
				return err
			}
			got64[r.Rank()] = []float64{float64(k) / 3}
			return r.AllReduceSum64(got64[r.Rank()])
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("step %d rank %d: %v", step, r, err)
			}
			if want := []float32{10, 100, float32(4 * step)}; got[r][0] != want[0] || got[r][1] != want[1] || got[r][2] != want[2] {
				t.Errorf("step %d rank %d: %v, want %v", step, r, got[r], want)
			}
			if got64[r][0] != got64[0][0] || got64[r][0] < 3.33 || got64[r][0] > 3.34 {
				t.Errorf("step %d rank %d: float64 sum %v (rank 0: %v), want 10/3 on every rank, bit for bit", step, r, got64[r][0], got64[0][0])
			}
		}
	}
}

func TestBroadcastCopiesTheRoot(t *testing.T) {
	ranks, _ := Local(3)
	bufs := [][]byte{[]byte("xyz"), make([]byte, 3), []byte("abc")}
	for _, err := range each(ranks, func(r *Rank) error { return r.Broadcast(bufs[r.Rank()], 2) }) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for r, b := range bufs {
		if string(b) != "abc" {
			t.Errorf("rank %d: %q", r, b)
		}
	}
}

func TestMismatchFailsEveryRank(t *testing.T) {
	ranks, _ := Local(2)
	errs := each(ranks, func(r *Rank) error { return r.AllReduceSum(make([]float32, 2+r.Rank())) })
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 1's buffer has 3 elements, rank 0's 2") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	ranks, _ = Local(2)
	errs = each(ranks, func(r *Rank) error {
		if r.Rank() == 0 {
			return r.AllReduceSum(make([]float32, 2))
		}
		return r.AllReduceSum64(make([]float64, 2))
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 1 called another operation ([]float64) than rank 0 ([]float32)") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if _, err := Local(0); err == nil {
		t.Error("Local(0) accepted")
	}
}

// A rank that leaves while the others wait in a collective makes them fail, naming it, rather
// than hang.
func TestLeaveUnblocksTheOthers(t *testing.T) {
	ranks, _ := Local(3)
	done := make(chan error, 2)
	for _, r := range ranks[:2] {
		go func() { done <- r.AllReduceSum(make([]float32, 4)) }()
	}
	time.Sleep(20 * time.Millisecond)
	ranks[2].Leave(errors.New("killed"))
	for range 2 {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "rank 2 of 3 left the run: killed") {
				t.Errorf("got %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a rank still waits 5s after another left")
		}
	}
	if err := ranks[0].Broadcast(nil, 0); err == nil {
		t.Error("a call after a rank left succeeded")
	}
}
