package core

import (
	"context"
	"errors"
	"sync"
)

// TrainContext is Train until ctx is done, and then exactly what Interrupt does: the epoch breaks
// at the next optimizer step (at least one step runs, even on a ctx done before the call), the
// run validates, writes its last checkpoint with stop reason "requested" and TrainContext
// returns nil, StopReason() saying StopRequested (ctx.Err() says it was the context). A graceful
// stop is not a failure, so it returns what Interrupt makes Train return rather than ctx.Err().
//
// A context rather than an option or a signal handler of nitro's own: it is how a Go program
// says "stop" (signal.NotifyContext for Ctrl+C, a deadline, a server's shutdown), the program
// keeps its signals, and the watch lasts exactly as long as the call: the goroutine that turns
// ctx into an Interrupt is stopped and waited for before TrainContext returns.
//
// With signal.NotifyContext, the signal stays caught until its stop func runs; call that stop
// once ctx is done (context.AfterFunc(ctx, stop)) for a second Ctrl+C to kill the process, as the
// CLI's does.
func (n *Nitro) TrainContext(ctx context.Context) error {
	if ctx == nil {
		return errors.New("TrainContext: ctx is nil: pass context.Background() for a run nothing stops, or call Train")
	}
	return n.train(ctx)
}

// interruptWhenDone calls Interrupt once ctx is done, from a goroutine of its own. The returned
// teardown stops that goroutine and waits for it, so none outlives the verb and no Interrupt
// lands after it. A nil ctx or one never done (context.Background) starts nothing; one done
// already interrupts at once, so the run stops after its first step whatever the scheduler does.
func (n *Nitro) interruptWhenDone(ctx context.Context) (teardown func()) {
	if ctx == nil || ctx.Done() == nil {
		return func() {}
	}
	if ctx.Err() != nil {
		n.Interrupt()
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
			n.Interrupt()
		case <-quit:
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}
