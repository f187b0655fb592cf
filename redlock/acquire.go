package redlock

import (
	"context"
	"time"
)

// Acquire implements driver.Backend. It asks every node at once and
// succeeds when a quorum granted the lock, the token was written back to a
// quorum (unless WithoutFencing), and the lease still has validity left:
// TTL − elapsed − (TTL × 0.01 + 2 ms) > 0. Otherwise it releases the lock
// on every node that may hold it, in the background, and returns
// ok=false: with a *QuorumError when more nodes failed (or did not answer
// in time) than a quorum can spare, or when the token could not be
// written back or no validity was left; with a nil error when enough
// nodes answered but other owners held the key on too many of them.
//
// The token is the largest of the granting quorum's tokens; with fencing
// it is then raised on a quorum, so that every later holder's quorum meets
// a node that issues larger ones (see docs/guarantees.md).
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := b.check(ctx, ttl); err != nil {
		return 0, false, err
	}
	if err := b.pending.wait(ctx, key, owner); err != nil {
		return 0, false, err
	}
	start := b.now()
	timeout := b.cfg.timeout(ttl)
	acq := b.start(ctx, "acquire", timeout, b.all, func(ctx context.Context, n *node) answer {
		tok, ok, err := n.b.Acquire(ctx, key, owner, ttl)
		return answer{yes: ok && err == nil, token: tok, err: err}
	})
	acq.wait(b, b.quorum, time.Now().Add(timeout))
	refusal := acq.refused(b)
	b.observe(ctx, "acquire", refusal == nil)
	if acq.yes < b.quorum {
		b.abandon(key, owner, acq)
		return 0, false, refusal
	}

	var token uint64
	for i, s := range acq.state {
		if s == stateYes {
			token = max(token, acq.tokens[i])
		}
	}
	if b.cfg.fencing {
		if err := b.writeBack(ctx, key, owner, token, timeout, acq); err != nil {
			b.abandon(key, owner, acq)
			return 0, false, err
		}
	}
	if elapsed := b.now().Sub(start); validity(ttl, elapsed) <= 0 {
		b.abandon(key, owner, acq)
		e := acq.quorumError(b)
		e.Elapsed = elapsed
		return 0, false, e
	}
	b.watchLate(key, owner, acq)
	return token, true, nil
}

// writeBack raises the fence of key to token on the nodes that granted
// the lock, conditional on owner still holding it there, and returns nil
// once a quorum of them holds a fence of at least token. A node whose own
// token is token already set its fence to it when it granted the lock.
func (b *Backend) writeBack(ctx context.Context, key, owner string, token uint64, timeout time.Duration, acq *round) error {
	var ask []int
	fenced := 0
	for i, s := range acq.state {
		switch {
		case s != stateYes:
		case acq.tokens[i] >= token:
			fenced++
		default:
			ask = append(ask, i)
		}
	}
	if fenced >= b.quorum {
		return nil
	}
	r := b.start(ctx, "fence", timeout, ask, func(ctx context.Context, n *node) answer {
		ok, err := n.fencer.RaiseFence(ctx, key, owner, token)
		return answer{yes: ok && err == nil, err: err}
	})
	r.yes += fenced
	r.wait(b, b.quorum, time.Now().Add(timeout))
	if r.yes >= b.quorum {
		return nil
	}
	return r.quorumError(b)
}
