package turnstile

import (
	"context"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Handing a lock to a waiter of the same Client without the store.
//
// A store whose tokens leave room between grants (driver.TokenRoom: every
// token a multiple of the room R, every later token for the key above
// the next multiple) lets a releasing lease give its lock to the head of
// its own Client's line for the key without a round trip: the lock stays
// held in the store under the releasing lease's owner id, and the head's
// lease takes that owner id, the token plus one and the rest of the TTL
// of the last confirmed grant or renewal (its watchdog renews it from
// there). A run of such handoffs gives T+1, …, T+R−1 after the store's
// T; the lease holding T+R−1 releases to the store, and if other
// processes tried the lock meanwhile (driver.NoticeReleaser says so) the
// head asks the store after a random pause, as their waiters do on the
// release notice, so that they are not starved.
//
// The owner id passes with the lock, so only a lease whose owner id is
// nobody else's can give it (not WithOwner's, which the caller may use
// again, nor an election's, by which observers know the leader), and
// only once nothing of the lease is on its way to the store under it
// (lifecycle.go): no renewal in flight, and the Release that hands it
// over is the lease's one operation. A lease that is not certainly held
// in the store — a quarter of its TTL gone, a release that failed before
// — goes through the store instead. The head must have asked for the
// same TTL under the same instance id. docs/guarantees.md ("Handoffs
// without the store") gives the argument for the tokens.

// handoff is a lock handed to a line's head without the store.
type handoff struct {
	owner string // the owner id the lock is held under in the store
	token uint64
	// sent is when the TTL of the last confirmed grant or renewal of the
	// lock began: the new lease's deadline counts from it.
	sent mono
}

// endsRun reports whether l's token is the last a run of handoffs
// without the store can give: its release goes to the store.
func (c *Client) endsRun(l *Lease) bool {
	return c.tokenRoom > 1 && l.token%c.tokenRoom == c.tokenRoom-1
}

// handOver gives l's lock to the head of this Client's line for l's key
// without the store, if the head is parked and may take it (see the top
// of this file). l is releasing (beginRelease found it held, with
// nothing of its own on the way to the store).
func (c *Client) handOver(l *Lease, st releaseStart) bool {
	if c.tokenRoom < 2 || c.endsRun(l) || now() >= st.sent.add(st.ttl/4) {
		return false
	}
	ln, found := c.lines.load(l.key)
	if !found {
		return false
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.dead || len(ln.waiters) == 0 {
		return false
	}
	head := ln.waiters[0]
	if head.state != waiterParked || !takesLocal(head.cfg, l.cfg, st.ttl) {
		return false
	}
	head.state = waiterHanded
	head.handed = handoff{owner: l.owner, token: l.token + 1, sent: st.sent}
	select {
	case ln.local <- struct{}{}:
	default: // a wake-up is pending already
	}
	// The head leaves the line with the lease (lineHeld again), or gives
	// the lock back to the store; either way no lease of the line holds
	// it meanwhile.
	if ln.holding == l {
		ln.state, ln.holding = lineOpen, nil
	}
	return true
}

// takesLocal reports whether a waiter with settings w may take a lock
// handed over without the store by a lease with settings l and TTL ttl:
// the same TTL and lock delay (the store holds the lock for them), the
// same instance id, no fixed owner id, no election.
func takesLocal(w, l *config, ttl time.Duration) bool {
	return w.ttl == ttl && w.lockDelay == l.lockDelay && w.instanceID == l.instanceID && w.owner == "" && !w.election
}

// releaseInStore releases l's lock in the store: with the release notice
// in any case for an election's lease, whose observers try nothing. tried
// reports that a store that tells it (driver.NoticeReleaser) said someone
// else had tried to take the lock meanwhile, and so was told: at the end
// of a run of handoffs the line's next waiter then races them for it
// (lineRace).
func (c *Client) releaseInStore(ctx context.Context, l *Lease) (ok, tried bool, err error) {
	if c.notices == nil {
		ok, err = c.backend.Release(ctx, l.key, l.owner)
		return ok, false, err
	}
	n := driver.NoticeIfTried
	if l.cfg.election {
		n = driver.NoticeAlways
	}
	return c.notices.ReleaseNotice(ctx, l.key, l.owner, n)
}
