package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/sweep"
)

// trialOrder is what rank 0 tells the other ranks of a trial under mpirun: everything a rank
// needs to set up the same run. Done ends the sweep.
type trialOrder struct {
	Number         int      `json:"number"`
	Sets           []string `json:"sets"`
	Seed           int      `json:"seed"`
	Dir            string   `json:"dir"`
	FromCheckpoint bool     `json:"from_checkpoint"`
	Overwrite      bool     `json:"overwrite"`
	Done           bool     `json:"done"`
}

// rankLink carries rank 0's trial orders to the other ranks over the run's collective.
type rankLink struct {
	rank int
	c    core.Collective
}

// newRankLink is the link under mpirun with more than one rank, else nil.
func newRankLink(c core.Collective) *rankLink {
	if c == nil || c.Size() < 2 {
		return nil
	}
	return &rankLink{rank: c.Rank(), c: c}
}

// send is rank 0's broadcast of an order: its length, then its JSON.
func (l *rankLink) send(o trialOrder) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	if err := l.c.Broadcast(n[:], 0); err != nil {
		return fmt.Errorf("sweep under mpirun: handing trial %d to the other ranks: %w", o.Number, err)
	}
	if err := l.c.Broadcast(b, 0); err != nil {
		return fmt.Errorf("sweep under mpirun: handing trial %d to the other ranks: %w", o.Number, err)
	}
	return nil
}

// receive is the other ranks' side of send.
func (l *rankLink) receive() (trialOrder, error) {
	var o trialOrder
	var n [8]byte
	if err := l.c.Broadcast(n[:], 0); err != nil {
		return o, fmt.Errorf("sweep under mpirun, rank %d: waiting for rank 0's next trial: %w", l.rank, err)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > 1<<20 {
		return o, fmt.Errorf("sweep under mpirun, rank %d: rank 0's trial order is %d bytes: not an order", l.rank, size)
	}
	b := make([]byte, size)
	if err := l.c.Broadcast(b, 0); err != nil {
		return o, fmt.Errorf("sweep under mpirun, rank %d: waiting for rank 0's next trial: %w", l.rank, err)
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("sweep under mpirun, rank %d: rank 0's trial order: %w", l.rank, err)
	}
	return o, nil
}

// follow is a rank other than 0 under mpirun: it trains each trial rank 0 orders, with a stopping
// rule that never stops by itself (rank 0's prune reaches it as a requested stop), until Done.
func (st *sweepSetup) follow(ctx context.Context, cfg sweep.Config) error {
	for {
		o, err := st.ranks.receive()
		if err != nil || o.Done {
			return err
		}
		n, err := st.setUp(o, &metricProbe{metric: cfg.Metric})
		if err != nil {
			return fmt.Errorf("trial %d: %w", o.Number, err)
		}
		if err := n.TrainContext(ctx); err != nil {
			return fmt.Errorf("trial %d: %w", o.Number, err)
		}
		fmt.Fprintf(st.stdout, "rank %d: trial %d ended at step %d (%s)\n", st.ranks.rank, o.Number, n.Step(), n.StopReason())
		n = nil
		runtime.GC()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
