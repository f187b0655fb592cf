package turnstile

import (
	"context"
	"fmt"
	"time"
)

// A lease's life. Every transition happens under the watchdog's mutex,
// the one owner of every lease's state, through the watchdog methods in
// this file and the renewals in watchdog.go:
//
//	held ──beginRelease──▶ releasing ──endRelease──▶ released
//	  │                        │  └──endRelease (store error)──▶ unknown ──beginRelease──▶ releasing
//	  │                        └──handed──▶ handed
//	  ├──lose──▶ lost ──beginRelease──▶ releasing (a store release only)
//	  └──close──▶ closed
//
// A lease is renewed by the watchdog only while held. Operations on the
// store under the lease's owner id — Extend, Release — run one at a time
// (Lease.op): a second Release waits for the first and finds it done, an
// Extend in flight finishes before a Release decides what to do. A lease
// hands its lock to a waiter of the same Client without the store only
// from held, with nothing of its own on the way to the store (no renewal
// in flight, the op held by that Release); once handed, the owner id is
// the successor's and the lease never sends anything under it again.
type leaseState uint8

const (
	// leaseHeld: the lock is the lease's; the watchdog renews it.
	leaseHeld leaseState = iota
	// leaseReleasing: a Release is deciding or on its way to the store.
	leaseReleasing
	// leaseUnknown: a Release failed on the way: the lock may or may not
	// be free in the store. A retried Release asks the store; it never
	// hands the lock over.
	leaseUnknown
	// leaseReleased: released in the store, or found not held there.
	leaseReleased
	// leaseHanded: handed to the next waiter of this Client without the
	// store; the owner id now belongs to that waiter's lease.
	leaseHanded
	// leaseLost: a renewal was refused, or the local deadline passed. A
	// Release still asks the store to free the lock (if it is still held
	// under this owner id, nobody else can be using it) — unless the
	// lease has a lock delay, which is for just such a holder.
	leaseLost
	// leaseClosed: Client.Close ended the lease; nothing more is sent.
	leaseClosed
)

var leaseStateNames = [...]string{
	leaseHeld: "held", leaseReleasing: "releasing", leaseUnknown: "release outcome unknown",
	leaseReleased: "released", leaseHanded: "handed over", leaseLost: "lost", leaseClosed: "closed",
}

func (s leaseState) String() string { return leaseStateNames[s] }

// releaseStart is what beginRelease found.
type releaseStart struct {
	// report: the lease was held; its release is reported to observers
	// and cancels its context.
	report bool
	// mayHand: the lease can hand its lock over without the store — it
	// was held, nothing of its own is on the way to the store, and its
	// owner id is its own (handoff.go's localGrant checks the rest).
	mayHand bool
	// sent is when the TTL of the last confirmed grant or renewal began.
	sent mono
	// ttl is the lease's TTL, which a waiter handed the lock must have
	// asked for.
	ttl time.Duration
}

// beginRelease moves l to releasing, or says why it cannot: released or
// handed already (ErrNotHeld), or closed (ErrClosed). Caller holds l.op.
func (w *watchdog) beginRelease(l *Lease) (releaseStart, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var st releaseStart
	switch l.state {
	case leaseReleased, leaseHanded:
		return st, fmt.Errorf("%w: released already", ErrNotHeld)
	case leaseClosed:
		return st, ErrClosed
	case leaseLost:
		if l.cfg.lockDelay > 0 {
			// The holder failed: freeing its lock now would cut the
			// delay its writes still on their way were given.
			return st, fmt.Errorf("%w: the lease was lost; its lock is left to the store, which frees it after the lock delay", ErrNotHeld)
		}
	case leaseHeld:
		st.report = true
		st.mayHand = !l.inflight && l.cfg.owner == "" && !l.cfg.election
		st.sent = l.deadline.add(-(l.ttl - l.drift))
		st.ttl = l.ttl
		w.remove(l)
		l.gen++ // a renewal in flight must not put the lease back
	}
	l.state = leaseReleasing
	return st, nil
}

// endRelease records the store's answer to a release: released, or
// unknown after an error.
func (w *watchdog) endRelease(l *Lease, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.state != leaseReleasing {
		return
	}
	if err != nil {
		l.state = leaseUnknown
	} else {
		l.state = leaseReleased
	}
}

// handed records that l's lock went to a waiter of this Client without
// the store.
func (w *watchdog) handed(l *Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.state == leaseReleasing {
		l.state = leaseHanded
	}
}

// acquireOp takes l's one operation slot, or gives up when ctx is done.
func (l *Lease) acquireOp(ctx context.Context) error {
	select {
	case l.op <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.op <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *Lease) releaseOp() { <-l.op }
