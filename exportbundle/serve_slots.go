package exportbundle

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Read slots, and why a slow body cannot starve a fast one.
//
// MaxReading bounds the bodies that hold a read slot. A client that trickles its body just above
// MinBodyRate keeps its slot for up to ReadTimeout, so that many such clients could hold every
// slot and a normal request would meet a 503 at once, however fast it sends. A newcomer's speed
// is unknown when its headers arrive, so it is measured instead:
//
//   - A request that finds every slot held reads on trial, beside the slots, for at most
//     trialWindow; at most MaxReading requests are on trial at once. A normal body arrives in
//     far less than that and never needs a slot.
//   - A body still arriving at the end of its trial takes a free slot, or the slot of the slowest
//     holder that has read for at least trialWindow and averages under half the newcomer's rate
//     (that holder is answered 503 with Retry-After); with neither it is answered 503. So a slot
//     goes to the faster body, and equally slow bodies do not churn through each other's slots.
//   - A request that finds every trial taken takes the trial of the slowest one that has read for
//     at least trialGrace (answered 503), waiting up to 2×trialGrace for one to have (at most
//     MaxReading requests wait, holding nothing but their connection); with none by then, or no
//     room to wait, it is answered 503. Clients that reconnect together to refill the trials
//     leave them all younger than trialGrace for a moment, which the wait outlasts; to keep a
//     fast request out they must also fill the waiters, over and over.
//
// Memory: bodies being read or waiting decoded for a run slot are at most 2×MaxReading (slots
// and trials), each at most the bundle's largest batch.
const (
	trialWindow = 200 * time.Millisecond
	trialGrace  = 25 * time.Millisecond
	shedFactor  = 2
)

// bodyRead is one request's claim on the read bounds while its body is read.
type bodyRead struct {
	start     time.Time
	n         atomic.Int64              // body bytes read so far
	stop      atomic.Pointer[busyError] // set when it lost its slot or trial: stop reading, answer 503
	interrupt func()                    // wakes a read blocked on the connection
	timer     *time.Timer               // the end of its trial
	tok       token                     // guarded by readSlots.mu
	reading   bool                      // guarded by readSlots.mu: its body is not read whole yet
}

type token int8

const (
	noToken token = iota
	slotToken
	trialToken
)

// rate is b's average bytes per second at now.
func (b *bodyRead) rate(now time.Time) float64 {
	return float64(b.n.Load()) / max(now.Sub(b.start).Seconds(), 1e-9)
}

// busyError is a body refused for the read bounds after it began: 503 with Retry-After.
type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }

// readSlots holds the read slots and trials of one server.
type readSlots struct {
	mu             sync.Mutex
	max            int
	slots, trials  int                    // held
	waiters        int                    // admits waiting for a trial to pass trialGrace
	holders, onTry map[*bodyRead]struct{} // still reading, by what they hold
}

func newReadSlots(max int) *readSlots {
	return &readSlots{max: max, holders: map[*bodyRead]struct{}{}, onTry: map[*bodyRead]struct{}{}}
}

// admit gives b a slot, else a trial (ending trialWindow from then), else the trial of the
// slowest body on trial for at least trialGrace, waiting up to 2×trialGrace for one to be (at most
// MaxReading requests wait so); false when none of those can be had.
func (s *readSlots) admit(b *bodyRead) bool {
	deadline := time.Now().Add(2 * trialGrace)
	waiting := false
	defer func() {
		if waiting {
			s.mu.Lock()
			s.waiters--
			s.mu.Unlock()
		}
	}()
	for {
		wait, ok := s.tryAdmit(b)
		if ok {
			return true
		}
		if wait <= 0 || time.Now().Add(wait).After(deadline) {
			return false
		}
		if !waiting {
			s.mu.Lock()
			waiting = s.waiters < s.max
			if waiting {
				s.waiters++
			}
			s.mu.Unlock()
			if !waiting {
				return false
			}
		}
		time.Sleep(wait)
	}
}

// tryAdmit is one try of admit, from now; when it fails, wait is how long until a body on trial
// has been for trialGrace (0: none is on trial).
func (s *readSlots) tryAdmit(b *bodyRead) (wait time.Duration, ok bool) {
	s.mu.Lock()
	b.start = time.Now()
	var victim *bodyRead
	switch {
	case s.slots < s.max:
		s.slots++
		b.tok = slotToken
		s.holders[b] = struct{}{}
	case s.trials < s.max:
		s.trials++
		b.tok = trialToken
		s.onTry[b] = struct{}{}
	default:
		victim = slowest(s.onTry, b.start, trialGrace, -1)
		if victim == nil {
			for c := range s.onTry {
				if w := c.start.Add(trialGrace).Sub(b.start); wait == 0 || w < wait {
					wait = w
				}
			}
			s.mu.Unlock()
			if wait == 0 {
				return 0, false
			}
			return max(wait, time.Millisecond), false
		}
		s.drop(victim, &busyError{fmt.Sprintf("busy: this body gave its trial read to a newer request (%.0f bytes/s after %v; every one of the server's %d read slots and %d trial reads was taken)",
			victim.rate(b.start), b.start.Sub(victim.start).Round(time.Millisecond), s.max, s.max)})
		b.tok = trialToken
		s.onTry[b] = struct{}{}
	}
	b.reading = true
	if b.tok == trialToken {
		b.timer = time.AfterFunc(trialWindow, func() { s.endTrial(b) })
	}
	s.mu.Unlock()
	if victim != nil {
		victim.interrupt()
	}
	return 0, true
}

// endTrial decides a trial still reading at its end: a free slot, a slower holder's slot, or 503.
func (s *readSlots) endTrial(b *bodyRead) {
	s.mu.Lock()
	if b.tok != trialToken || !b.reading {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	delete(s.onTry, b)
	s.trials--
	var victim, cut *bodyRead
	switch {
	case s.slots < s.max:
		s.slots++
	default:
		victim = slowest(s.holders, now, trialWindow, b.rate(now)/shedFactor)
		if victim == nil {
			b.tok = noToken
			b.stop.Store(&busyError{fmt.Sprintf("busy: all %d read slots are held by bodies at least half as fast as this one (%.0f bytes/s), which did not arrive within its %v trial read (retry after 1s)",
				s.max, b.rate(now), trialWindow)})
			cut = b
			break
		}
		s.drop(victim, &busyError{fmt.Sprintf("busy: this body's read slot went to one over %d times as fast (this one %.0f bytes/s after %v; the server reads %d bodies at once)",
			shedFactor, victim.rate(now), now.Sub(victim.start).Round(time.Millisecond), s.max)})
		s.slots++
	}
	if cut == nil {
		b.tok = slotToken
		s.holders[b] = struct{}{}
	}
	s.mu.Unlock()
	for _, c := range []*bodyRead{victim, cut} {
		if c != nil {
			c.interrupt()
		}
	}
}

// drop takes victim's slot or trial from it (s.mu held), telling it why (nil: b gives it back).
func (s *readSlots) drop(victim *bodyRead, why *busyError) {
	if why != nil {
		victim.stop.Store(why)
	}
	switch victim.tok {
	case slotToken:
		delete(s.holders, victim)
		s.slots--
	case trialToken:
		delete(s.onTry, victim)
		s.trials--
	}
	victim.tok = noToken
}

// slowest is the body in set with the lowest average rate at now among those that began at least
// age before now and average under below (any rate when below is negative); nil for none.
func slowest(set map[*bodyRead]struct{}, now time.Time, age time.Duration, below float64) *bodyRead {
	var best *bodyRead
	bestRate := 0.0
	for c := range set {
		if now.Sub(c.start) < age {
			continue
		}
		r := c.rate(now)
		if below >= 0 && r >= below {
			continue
		}
		if best == nil || r < bestRate {
			best, bestRate = c, r
		}
	}
	return best
}

// read marks b's body read whole: nothing sheds it now. It returns why b was refused if it lost
// its slot or trial first.
func (s *readSlots) read(b *bodyRead) *busyError {
	s.mu.Lock()
	b.reading = false
	delete(s.holders, b)
	delete(s.onTry, b)
	s.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
	return b.stop.Load()
}

// release gives back whatever b holds.
func (s *readSlots) release(b *bodyRead) {
	s.mu.Lock()
	b.reading = false
	s.drop(b, nil)
	s.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
}
