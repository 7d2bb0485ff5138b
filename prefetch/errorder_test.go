package prefetch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

// TestErrorsArriveInIndexOrder: a batch that fails (in BatchAt or in Transfer) reaches the
// consumer in its own turn, after every batch before it, on every path: a run then fails at the
// same step with or without prefetch, however far ahead the workers read.
func TestErrorsArriveInIndexOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, p := range []prefetch.Path{prefetch.PathInline, prefetch.PathProducer, prefetch.PathFanout} {
		for _, where := range []string{"BatchAt", "Transfer"} {
			t.Run(fmt.Sprintf("%s/%s", p, where), func(t *testing.T) {
				boom := errors.New("boom")
				f := &fakeSource{n: 12, rows: 4}
				d := &devices{}
				if where == "BatchAt" {
					f.hook = func(i int) error {
						if i == 5 {
							return boom
						}
						time.Sleep(time.Duration(12-i) * 200 * time.Microsecond) // early batches are the slow ones
						return nil
					}
				} else {
					d.hook = func(i int) error {
						if i == 5 {
							return boom
						}
						return nil
					}
				}
				var src prefetch.Source = f
				if p == prefetch.PathFanout {
					src = &epochSource{fakeSource: f}
				}
				s, err := prefetch.Start(context.Background(), declare(t, src, p, opts(4, 2, 8)), 1, d.config())
				if err != nil {
					t.Fatal(err)
				}
				got, err := consume(s, d, 0)
				if !errors.Is(err, boom) {
					t.Fatalf("err %v, want boom", err)
				}
				var be *prefetch.BatchError
				if !errors.As(err, &be) || be.Index != 5 || be.Op != where {
					t.Errorf("err %v, want a BatchError of batch 5 in %s", err, where)
				}
				if !slices.Equal(got, indices(0, 5)) {
					t.Errorf("delivered %v before the error, want %v", got, indices(0, 5))
				}
				if err := s.Close(); err != nil {
					t.Error(err)
				}
				d.check(t)
			})
		}
	}
}
