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
// waits, not one per waiter. While the head's predecessor holds the lock,
// the head ignores release notices from the store (they are for an
// earlier release) and waits for that lease to end locally.

// line is the queue of one Client's waiters for one key.
type line struct {
	fifo[*waiter]
	local chan struct{} // a lease of this Client on key ended

	// Guarded by the fifo's mu.
	holding *Lease // the lease a waiter of this line won, until it ends
	notice  <-chan struct{}
	stopSub func()
	subbed  bool // a subscription was attempted

	// Handing over within the Client (handoff.go).
	quietRun     int  // releases in a row without a notice
	quietPending bool // a quiet release that no waiter of the line took yet
	noWake       bool // the last release woke the head otherwise (a handoff)
	// aloud: the last release was aloud for fairness, and the head races
	// the other processes on the store's notice. missed: a notice came
	// while a lease of this line still held the lock, and the head set
	// it aside (it may be the aloud release's own notice, which can
	// arrive before the release's reply).
	aloud, missed bool
}

func newLine() *line { return &line{local: make(chan struct{}, 1)} }

// waiter is one Acquire call in a line.
type waiter struct {
	seat
	// Handoffs (driver.HandOff), guarded by the line's mu: the head is
	// ready for one while it waits; inflight while one is on its way to
	// owner; its outcome arrives on grant.
	ready, inflight bool
	owner           string
	ttl             time.Duration
	grant           chan handoff
	cfg             *config // the call's settings
	// afterGrant: the previous head took the lock, so the new head waits
	// for its release instead of attempting at once. Written before turn
	// is closed.
	afterGrant bool
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
	w := &waiter{seat: newSeat(), grant: make(chan handoff, 1), owner: k.owner, ttl: k.cfg.ttl, cfg: k.cfg}
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
	sig := signals{local: ln.local, heldHere: ln.heldHere}
	if c.handsOver() {
		sig.slot = &handoffSlot{ln: ln, w: w}
	}
	// Attempt at once unless this call has just failed one, or the
	// previous head has just taken the lock.
	first := !w.afterGrant && (queued || !tried)
	if ch, fresh := ln.subscribe(c, k.cfg); ch != nil {
		sig.notice = ch
		first = first || fresh
	}
	l, err := k.contend(ctx, sig, first)
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
	case <-expired:
		return true, k.fail(fmt.Errorf("%w (waited %v behind other waiters of this process)", ErrNotAcquired, budget))
	}
}

// leave takes w out of its line. won is the lease w took, if any: the
// next head then waits for it to end.
func (ln *line) leave(c *Client, w *waiter, won *Lease) {
	var stop func()
	ln.mu.Lock()
	emptied := c.lines.remove(ln, w, func(next *waiter) {
		next.afterGrant = won != nil
		// The new head will wait for this grant's release: it can take
		// a handoff from it at once, before it even runs.
		next.ready = won != nil && c.handsOver()
	})
	if won != nil {
		ln.quietPending = false
	}
	if won != nil && won.ctx.Err() == nil {
		// The next head waits for this lease to end (leaseEnded clears
		// holding; it runs after the lease's context is cancelled, so a
		// lease that ended already is never recorded here).
		ln.holding = won
		// Notices until now are for releases before this grant.
		select {
		case <-ln.notice:
		default:
		}
		select {
		case <-ln.local:
		default:
		}
		ln.missed = false
	}
	// A handoff that reached w after it stopped waiting: give the lock
	// back (unless it is the lease w won).
	var orphan string
	select {
	case g := <-w.grant:
		if (g.ok || g.unknown) && (won == nil || won.owner != g.holder()) {
			orphan = g.holder()
		}
	default:
	}
	notify := false
	if emptied {
		stop, ln.stopSub = ln.stopSub, nil
		// Released quietly for a waiter that did not take the lock: the
		// waiters of other processes must hear of it after all.
		notify = ln.quietPending
	}
	ln.mu.Unlock()
	if stop != nil {
		stop()
	}
	if notify {
		c.notifyInBackground(ln.key)
	}
	if orphan != "" {
		c.releaseInBackground(ln.key, orphan, w.ttl)
	}
}

// heldHere reports whether a lease won in this line still holds the lock.
// noticed says the head asks because a release notice came: it sets the
// notice aside, and leaseEnded remembers that it did.
func (ln *line) heldHere(noticed bool) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.holding != nil && noticed {
		ln.missed = true
	}
	return ln.holding != nil
}

// subscribe starts the line's subscription to release notices, once per
// line. It returns the notice channel (nil if the store cannot notify)
// and whether this call subscribed.
func (ln *line) subscribe(c *Client, cfg *config) (<-chan struct{}, bool) {
	n, ok := c.backend.(driver.Notifier)
	if !ok || !cfg.notify {
		return nil, false
	}
	ln.mu.Lock()
	if ln.subbed {
		ch := ln.notice
		ln.mu.Unlock()
		return ch, false
	}
	ln.subbed = true
	ln.mu.Unlock()

	// The subscription serves the whole line, so it does not end with
	// the context of the waiter that happens to make it.
	sctx, cancel := context.WithCancel(context.Background())
	ch, stop, err := n.Released(sctx, ln.key)
	if err != nil {
		cancel()
		c.cfg.logger.Debug("turnstile: release notices unavailable, polling", "key", ln.key, "backend", c.name, "err", err)
		return nil, false
	}
	ln.mu.Lock()
	if ln.dead {
		ln.mu.Unlock()
		stop()
		cancel()
		return nil, false
	}
	ln.notice = ch
	ln.stopSub = func() { stop(); cancel() }
	ln.mu.Unlock()
	return ch, true
}

// leaseEnded wakes the line of l's key, if any: l was released or lost.
// It must run after l's context was cancelled.
func (c *Client) leaseEnded(l *Lease) {
	ln, ok := c.lines.load(l.key)
	if !ok {
		return
	}
	ln.mu.Lock()
	if ln.holding == l {
		ln.holding = nil
	}
	wake := !ln.noWake // not if handed over: the handoff wakes the head
	if ln.aloud {
		// Released aloud for the other processes to race: the head
		// races them on the store's notice, like them. If that notice
		// came before this (the head set it aside while the lease still
		// held the lock), or the line has no notices, this is the wake-up.
		wake = ln.missed || ln.notice == nil
	}
	ln.noWake, ln.aloud, ln.missed = false, false, false
	ln.mu.Unlock()
	if !wake {
		return
	}
	select {
	case ln.local <- struct{}{}:
	default:
	}
}
