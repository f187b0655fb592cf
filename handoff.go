package turnstile

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Releasing to a waiter of the same Client. When the head of this
// Client's line for a key waits for a lease of the same Client, the
// lease's release can give it the lock without a race: handed over
// without the store at all while the tokens leave room (driver.TokenRoom,
// below), handed over in the release's own round trip (driver.HandOff),
// or released without a notice to other processes (driver.QuietReleaser)
// so that the head's attempt meets no competition. Every maxQuietRun-th
// release is aloud instead, and the Client's waiters race the others for
// it.
//
// Without the store: the lock stays held in the store under the releasing
// lease's owner id, and the head's lease takes that owner id, the token
// plus one and the rest of the TTL of the last confirmed grant or renewal
// (its watchdog renews it from there). The backend promises that its next
// grant's token for the key is above every token this makes (they stay
// below the next multiple of the room), so storage that checks tokens
// sees them strictly increase across the critical sections, as ever. A
// lease whose TTL is a quarter gone, or asked for with another TTL, goes
// through the store instead, as does an election's (takesLocal).

// maxQuietRun is how many releases in a row a Client hands to its own
// waiters without telling other processes; then one release is aloud and
// its own waiters race the others for it, so that no process starves.
const maxQuietRun = 16

// handoffSlot is where a line's head receives the lock from a releasing
// lease of its own Client (driver.HandOff).
type handoffSlot struct {
	ln *line
	w  *waiter
}

// handoff is the outcome of one handoff to a waiter.
type handoff struct {
	owner string // the waiter's owner id the handoff was addressed to
	token uint64
	// sent is when the lease's TTL starts at the latest: when the
	// HandOff was sent, or (local) when the last confirmed grant or
	// renewal of the lock was sent.
	sent    mono
	ok      bool // handed over
	unknown bool // the store failed: the lock may or may not be the waiter's
	// local: handed over without the store; the lock stays held there
	// under lockOwner, which the new lease takes.
	local     bool
	lockOwner string
}

// holder is the owner id the lock is held under after the handoff.
func (g handoff) holder() string {
	if g.local {
		return g.lockOwner
	}
	return g.owner
}

// handsOver reports whether a releasing lease can give the lock to a
// waiter of this Client: through the store, or without it.
func (c *Client) handsOver() bool { return c.handOff != nil || c.tokenRoom > 1 }

// takesLocal reports whether w may take l's lock without the store (its
// owner id and token, the rest of its TTL): it asked for the TTL the lock
// has, under the same instance id, and is no election's campaign, whose
// leader is known by an owner id of its own (an election's lease never
// gets here: releaseInStore).
func takesLocal(w *waiter, l *Lease, ttl time.Duration) bool {
	return w.ttl == ttl && w.cfg.instanceID == l.cfg.instanceID && !w.cfg.aloud
}

// roomUsed reports whether l's token is the last a run of handoffs
// without the store can give (driver.TokenRoom).
func (c *Client) roomUsed(l *Lease) bool {
	return c.tokenRoom > 1 && l.token%c.tokenRoom == c.tokenRoom-1
}

// localGrant is the handoff that l's release can give a waiter of this
// Client without the store (see the top of this file), with the TTL the
// waiter must have asked for; ok is false if l cannot give one.
func (c *Client) localGrant(l *Lease) (g handoff, ttl time.Duration, ok bool) {
	if c.tokenRoom < 2 || c.roomUsed(l) {
		return handoff{}, 0, false
	}
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	if l.state != stateHeld {
		return handoff{}, 0, false
	}
	sent := l.deadline.add(-(l.ttl - l.drift))
	if now() >= sent.add(l.ttl/4) {
		return handoff{}, 0, false
	}
	return handoff{token: l.token + 1, sent: sent, ok: true, local: true, lockOwner: l.owner}, l.ttl, true
}

// open makes the head a target for handoffs while it waits.
func (h *handoffSlot) open(k *contender) {
	h.ln.mu.Lock()
	h.w.ready, h.w.owner, h.w.ttl = true, k.owner, k.cfg.ttl
	h.ln.mu.Unlock()
}

// close ends that; it reports whether a handoff to the head is on its
// way, which the head must then wait for: its owner id is in use.
func (h *handoffSlot) close() (inflight bool) {
	h.ln.mu.Lock()
	defer h.ln.mu.Unlock()
	h.w.ready = false
	return h.w.inflight
}

// pending closes the slot and takes a handoff that reached it or is on
// its way (attempting nothing meanwhile: the owner id is in use).
// handled reports that there was one; done, that it ended the wait with a
// lease or an error.
func (k *contender) pending(ctx context.Context, slot *handoffSlot) (l *Lease, handled, done bool, err error) {
	inflight := slot.close()
	select {
	case g := <-slot.w.grant: // arrived as another signal did
		l, done, err = k.take(ctx, g)
		return l, true, done, err
	default:
	}
	if !inflight {
		return nil, false, false, nil
	}
	l, err = k.receive(ctx, slot)
	return l, true, l != nil || err != nil, err
}

// receive waits for the handoff on its way to the head.
func (k *contender) receive(ctx context.Context, slot *handoffSlot) (*Lease, error) {
	select {
	case <-ctx.Done():
		return nil, k.cancelled(ctx)
	case g := <-slot.w.grant:
		l, _, err := k.take(ctx, g)
		return l, err
	}
}

// take turns a handoff into a lease. done reports that the wait is over
// (a lease or an error); otherwise the caller goes on waiting.
func (k *contender) take(ctx context.Context, g handoff) (l *Lease, done bool, err error) {
	if g.owner != k.owner {
		return nil, false, nil // for an owner id this call no longer uses
	}
	switch {
	case g.ok:
		if l := k.c.newLease(ctx, k.key, g.holder(), g.token, g.sent, k.cfg); l != nil {
			return l, true, nil
		}
		// Born expired: the handoff took longer than the TTL allows.
		k.c.releaseInBackground(k.key, g.holder(), k.cfg.ttl)
		if !g.local {
			k.owner = newOwner(k.cfg)
		}
		k.lastErr = fmt.Errorf("%w: handoff took longer than the ttl %v allows", ErrNotAcquired, k.cfg.ttl)
		return nil, false, nil
	default:
		// Not handed over, or unknown: ask the store. With the same owner
		// id, an attempt takes over a lock the handoff did give us.
		l, err := k.try(ctx)
		return l, l != nil || err != nil, err
	}
}

// releaseInStore releases l's lock in the store. When the head of this
// Client's line for the key waits for it, the lock is handed to the head
// without the store, or in the same round trip (driver.HandOff), or
// released quietly for it (driver.QuietReleaser); every maxQuietRun-th
// release is aloud instead. handed reports that the head got the lock
// without the store: nothing ended in the store, and the head needs no
// wake-up (Release then skips leaseEnded).
func (c *Client) releaseInStore(ctx context.Context, l *Lease) (ok, handed bool, err error) {
	ho, qr, ar := c.handOff, c.quiet, c.aloud
	canHand, canQuiet := ho != nil, qr != nil
	if (!canHand && !canQuiet && c.tokenRoom < 2) || l.cfg.aloud {
		// An election's resignation is never handed over or quiet: the
		// observers hear of it, and the next leader has its own owner id.
		ok, err = c.plainRelease(ctx, l)
		return ok, false, err
	}
	ln, found := c.lines.load(l.key)
	if !found {
		ok, err = c.plainRelease(ctx, l)
		return ok, false, err
	}
	local, localTTL, canLocal := c.localGrant(l)
	var to *waiter
	quiet, aloud := false, false
	ln.mu.Lock()
	if !ln.dead && len(ln.waiters) > 0 {
		// A run of handoffs without the store that used up the token's
		// room ends with the aloud release, as a run of maxQuietRun does.
		if ln.quietRun < maxQuietRun && !c.roomUsed(l) {
			ln.quietRun++
			head := ln.waiters[0]
			if canLocal && head.ready && !head.inflight && takesLocal(head, l, localTTL) {
				local.owner = head.owner
				select {
				case head.grant <- local: // the head's lease
					if ln.holding == l {
						ln.holding = nil
					}
					ln.mu.Unlock()
					return true, true, nil
				default:
				}
			}
			if canHand && head.ready && !head.inflight {
				to = head
				to.inflight = true
				ln.noWake = true // the handoff wakes the head
			} else if canQuiet {
				quiet = true
				ln.quietPending = true
			}
		} else {
			ln.quietRun = 0
			ln.aloud = true
			aloud = ar != nil
		}
	}
	var owner string
	var ttl time.Duration
	if to != nil {
		owner, ttl = to.owner, to.ttl
	}
	ln.mu.Unlock()

	switch {
	case to != nil:
		sent := now()
		token, ok, err := ho.HandOff(ctx, l.key, l.owner, owner, ttl)
		g := handoff{owner: owner, token: token, sent: sent, ok: ok && err == nil, unknown: err != nil}
		ln.mu.Lock()
		to.inflight = false
		waiting := slices.Contains(ln.waiters, to)
		if waiting {
			select {
			case to.grant <- g: // cap 1: one handoff in flight per waiter
			default:
				waiting = false
			}
		}
		ln.mu.Unlock()
		if !waiting && (g.ok || g.unknown) {
			c.releaseInBackground(l.key, owner, ttl) // it gave up meanwhile
		}
		return ok, false, err
	case quiet:
		ok, err = qr.ReleaseQuiet(ctx, l.key, l.owner)
		return ok, false, err
	case aloud:
		// The head waits for the notice (leaseEnded), as the other
		// processes' waiters do; if none of them tried to take the lock,
		// none is sent and the head is woken here instead.
		ok, waited, err := ar.ReleaseWaited(ctx, l.key, l.owner)
		if err == nil && !waited {
			ln.mu.Lock()
			ln.aloud = false
			ln.mu.Unlock()
		}
		return ok, false, err
	default:
		ok, err = c.plainRelease(ctx, l)
		return ok, false, err
	}
}

// plainRelease is a release that hands nothing to a waiter of this
// Client: aloud if l asks for it (config.aloud) and the store can tell
// (driver.AloudReleaser).
func (c *Client) plainRelease(ctx context.Context, l *Lease) (bool, error) {
	if l.cfg.aloud && c.aloud != nil {
		return c.aloud.ReleaseAloud(ctx, l.key, l.owner)
	}
	return c.backend.Release(ctx, l.key, l.owner)
}

// notifyInBackground sends key's release notice; Close waits for it.
func (c *Client) notifyInBackground(key string) {
	qr := c.quiet
	if qr == nil {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := qr.Notify(ctx, key); err != nil {
			c.cfg.logger.Debug("turnstile: release notice failed", "key", key, "backend", c.name, "err", err)
		}
	}()
}
