package turnstile

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Coalescing. With it on (the default), the waiters of one Client for one
// key form a local line, first come first served: only the head of the
// line contends with the store, the others wait for their turn without a
// round trip. A release then costs one store attempt per process that
// waits, not one per waiter. While a lease won in the line holds the
// lock, the head does not ask the store at all: it waits for that lease
// to end, or to hand it the lock (handoff.go).

// lineState is what a line knows of its key's lock. It changes under the
// line's mutex: won when a waiter of the line takes the lock, ended when
// that lease ends (leaseEnded), asked when the head goes to the store.
//
//	open ──won──▶ held ──ended──▶ open
//	               └──released at a run's end, others told──▶ race ──asked──▶ open
type lineState uint8

const (
	// lineOpen: no lease won in the line is known to hold the lock; the
	// head asks the store.
	lineOpen lineState = iota
	// lineHeld: a lease won in the line holds the lock (line.holding).
	// The head waits for it to end here: release notices from the store
	// are for earlier releases.
	lineHeld
	// lineRace: that lease ended a run of handoffs without the store
	// (handoff.go) and was released to it while waiters of other
	// processes had tried the lock (driver.NoticeReleaser), and were
	// told: the head asks after a random pause below noticeJitter, as
	// they do on the notice, so that the lock does not stay with this
	// Client time after time.
	lineRace
)

// waiterState is where a waiter is in its line. It changes under the
// line's mutex.
//
//	queued ──promoted──▶ asking ⇄ parked ──handOver──▶ handed ──taken──▶ asking
type waiterState uint8

const (
	// waiterQueued: behind the head.
	waiterQueued waiterState = iota
	// waiterAsking: the head, deciding or asking the store.
	waiterAsking
	// waiterParked: the head, waiting for a signal; a releasing lease of
	// this Client may hand it the lock.
	waiterParked
	// waiterHanded: a lock was handed to it (waiter.handed), and its
	// line's local channel woke it.
	waiterHanded
)

// line is the queue of one Client's waiters for one key.
type line struct {
	fifo[*waiter]
	local chan struct{} // wakes the head: a lease of this Client on key ended

	// Guarded by the fifo's mu.
	state   lineState
	holding *Lease // lineHeld: the lease a waiter of this line won
	sub     subscription
}

func newLine() *line { return &line{local: make(chan struct{}, 1)} }

// waiter is one Acquire call in a line.
type waiter struct {
	seat
	cfg *config // the call's settings
	// Guarded by the line's mu.
	state  waiterState
	handed handoff // waiterHanded: the lock handed over
}

// waitInLine waits in the Client's local line for key (see the top of this file).
func (c *Client) waitInLine(ctx context.Context, k *contender) (*Lease, error) {
	// Try at once if nobody of this Client waits for the key, and nobody
	// is trying it right now: callers arriving together then make one
	// attempt between them, and the others line up.
	tried := false
	if !c.lines.busy(k.key) {
		h := maphash.String(c.seed, k.key)
		slot := &c.trying[h%uint64(len(c.trying))]
		h |= 1 << 63 // 0 marks a free slot
		mine := slot.CompareAndSwap(0, h)
		// A slot taken by another key leaves this attempt unregistered:
		// callers for this key may then attempt together, which costs an
		// attempt, never a wrong answer (the store decides who wins).
		if mine || slot.Load() != h {
			l, err := k.try(ctx)
			if mine {
				slot.Store(0)
			}
			if l != nil || err != nil {
				return l, err
			}
			tried = true
		}
	}
	w := &waiter{seat: newSeat(), cfg: k.cfg}
	ln := c.lines.join(k.key, w, newLine)
	// Told once the call has its place in the line: an Acquire that
	// starts after this event lines up behind this one.
	k.startWaiting()
	var won *Lease
	defer func() { ln.leave(c, w, won) }()

	queued, err := k.awaitTurn(ctx, w)
	if err != nil {
		return nil, err
	}
	ln.lead(w)
	sig := signals{line: ln, w: w}
	// Attempt at once unless this call has just failed one — but look
	// again after subscribing: a release between that attempt and the
	// subscription sent no notice this line could see. A lease of the
	// line holding the lock is waited for in any case (contend).
	ch, fresh := ln.subscribe(c, k.cfg)
	sig.notice = ch
	l, err := k.contend(ctx, sig, queued || !tried || fresh)
	if l != nil {
		won = l
	}
	return l, err
}

// awaitTurn waits until w heads its line, and reports whether it had to
// wait. A waiter behind others waits at most the longest total wait its
// Backoff allows (Exponential: the sum of its retries' ceilings), then
// gives up with ErrNotAcquired.
func (k *contender) awaitTurn(ctx context.Context, w *waiter) (bool, error) {
	select {
	case <-w.turn:
		return false, nil
	default:
	}
	var expired <-chan time.Time
	budget, bounded := waitBudget(k.cfg.backoff)
	if bounded {
		t := time.NewTimer(budget)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.turn:
		return true, nil
	case <-ctx.Done():
		return true, k.cancelled(ctx)
	case <-k.c.closing:
		return true, k.fail(ErrClosed)
	case <-expired:
		return true, k.fail(fmt.Errorf("%w (waited %v behind other waiters of this process)", ErrNotAcquired, budget))
	}
}

// lead marks w, whose turn has come, as the head: promoted behind a
// waiter that left, or first in a line it found empty.
func (ln *line) lead(w *waiter) {
	ln.mu.Lock()
	if w.state == waiterQueued {
		w.state = waiterAsking
	}
	ln.mu.Unlock()
}

// park makes the head a target for handoffs while it waits for a signal.
func (ln *line) park(w *waiter) {
	ln.mu.Lock()
	if w.state == waiterAsking {
		w.state = waiterParked
	}
	ln.mu.Unlock()
}

// unpark ends that. It returns the handoff that reached w meanwhile, if
// one did, and what the head is to do about the store: ask it at once,
// ask after a random pause (lineRace), or not at all (lineHeld).
func (ln *line) unpark(w *waiter) (g handoff, handed bool, ask, pause bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if w.state == waiterHanded {
		w.state = waiterAsking
		return w.handed, true, false, false
	}
	w.state = waiterAsking
	switch ln.state {
	case lineHeld:
		return handoff{}, false, false, false
	case lineRace:
		ln.state = lineOpen
		return handoff{}, false, true, true
	}
	return handoff{}, false, true, false
}

// leave takes w out of its line. won is the lease w took, if any: the
// line then holds the lock, and the next head waits for it to end.
func (ln *line) leave(c *Client, w *waiter, won *Lease) {
	var stop func()
	var orphan *handoff
	ln.mu.Lock()
	if w.state == waiterHanded {
		// A lock handed to w as it stopped waiting: give it back below.
		orphan = &w.handed
	}
	held := won != nil && won.ctx.Err() == nil
	emptied := c.lines.remove(ln, w, func(next *waiter) {
		next.state = waiterAsking
		if held {
			// The new head will wait for this grant's release: it can
			// take a handoff from it at once, before it even runs.
			next.state = waiterParked
		}
	})
	if held {
		// leaseEnded clears holding; it runs after the lease's context
		// is cancelled, so a lease that ended already is never
		// recorded here.
		ln.state, ln.holding = lineHeld, won
		// Wake-ups until now are for releases before this grant.
		select {
		case <-ln.local:
		default:
		}
		ln.sub.drain()
	}
	if emptied {
		stop = ln.sub.end()
	}
	ln.mu.Unlock()
	if stop != nil {
		c.unsubscribe(stop)
	}
	if orphan != nil {
		c.giveBack(ln.key, orphan.owner, w.cfg.ttl, true)
	}
}

// leaseEnded wakes the line of l's key, if any: l was released to the
// store, lost, or closed. race says the release ended a run of handoffs
// and told waiters of other processes, who race for the lock (lineRace). It must run after l's
// context was cancelled.
func (c *Client) leaseEnded(l *Lease, race bool) {
	ln, ok := c.lines.load(l.key)
	if !ok {
		return
	}
	ln.mu.Lock()
	if ln.holding == l || ln.holding == nil {
		ln.holding = nil
		ln.state = lineOpen
		if race {
			ln.state = lineRace
		}
	}
	ln.mu.Unlock()
	select {
	case ln.local <- struct{}{}:
	default:
	}
}

// subState is where a line's subscription to release notices is.
type subState uint8

const (
	subNone     subState = iota // nobody subscribed yet
	subStarting                 // a waiter is subscribing
	subActive                   // notices arrive on ch
	subOff                      // the store sends none, or the line ended
)

// subscription is a line's subscription to its key's release notices
// (driver.Notifier), made once for the whole line by its first head.
// Guarded by the line's mu.
type subscription struct {
	state subState
	ch    <-chan struct{}
	stop  func()
}

// drain drops a notice that is waiting: it is for an earlier release.
func (s *subscription) drain() {
	if s.state == subActive {
		select {
		case <-s.ch:
		default:
		}
	}
}

// end turns the subscription off and returns what stops it, if anything.
func (s *subscription) end() func() {
	stop := s.stop
	s.state, s.ch, s.stop = subOff, nil, nil
	return stop
}

// subscribe starts the line's subscription to release notices, once per
// line. It returns its channel (nil if there is none) and whether this
// call subscribed.
func (ln *line) subscribe(c *Client, cfg *config) (<-chan struct{}, bool) {
	n, ok := c.backend.(driver.Notifier)
	if !ok || !cfg.notify {
		return nil, false
	}
	ln.mu.Lock()
	if ln.sub.state != subNone {
		ch := ln.sub.ch
		ln.mu.Unlock()
		return ch, false
	}
	ln.sub.state = subStarting
	ln.mu.Unlock()

	// The subscription serves the whole line, so it does not end with
	// the context of the waiter that happens to make it.
	sctx, cancel := context.WithCancel(context.Background())
	ch, stop, err := n.Released(sctx, ln.key)
	if err != nil {
		cancel()
		c.cfg.logger.Debug("turnstile: release notices unavailable, polling", "key", ln.key, "backend", c.name, "err", err)
		ln.mu.Lock()
		if ln.sub.state == subStarting {
			ln.sub.state = subOff
		}
		ln.mu.Unlock()
		return nil, false
	}
	ln.mu.Lock()
	if ln.dead || ln.sub.state != subStarting {
		ln.mu.Unlock()
		stop()
		cancel()
		return nil, false
	}
	ln.sub = subscription{state: subActive, ch: ch, stop: func() { stop(); cancel() }}
	ln.mu.Unlock()
	return ch, true
}
