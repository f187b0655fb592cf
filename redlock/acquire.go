package redlock

import (
	"context"
	"time"
)

// Acquire implements driver.Backend. It asks every node at once and
// succeeds when a quorum granted the lock, the token was written back to a
// quorum (unless WithoutFencing), and the lease still has validity left:
// TTL − elapsed − (TTL × 0.01 + 2 ms) > 0. Otherwise it releases the lock
// on every node that may hold it, in the background, and returns ok=false
// with an error that says why.
//
// Each node says yes (granted), no (held by another owner) or fails (an
// error, or no answer within the node timeout). With N nodes and quorum
// q, a round without q yes is:
//
//   - a definite "not acquired", ok=false with a nil error, only when
//     more than N − q nodes said no — the refusals alone rule a quorum
//     out, whatever the other nodes said or would have said — and at
//     least q nodes answered (which more than N − q refusals imply for an
//     odd N; with 4 nodes, 2 refusals and 2 failures are not enough);
//   - a *QuorumError otherwise: failed nodes are what keep the quorum out
//     of reach (had they said yes, it might have been reached, or too few
//     nodes are up to decide at all), so the outcome is unknown even if
//     every node that answered said no. With 5 nodes, 2 refusals and 3
//     failures are a QuorumError, not "held by someone else".
//
// A *QuorumError is also the result when the token could not be written
// back or no validity was left. Acquire returns as soon as the result is
// certain: at once after q yes; once more than N − q nodes said no and at
// least q answered; or, once yes + pending < q, when even all the pending nodes
// saying no could not make a definite refusal (yes + failed ≥ q, or more
// than N − q failed). Until then it takes the pending answers, at most
// until the node timeout, when those still pending count as failed.
// With an odd N and no failed node this is the moment a quorum of yes
// became impossible, so a key held elsewhere is refused as fast as ever;
// with an even N it takes q answers, one more than the N − q + 1
// refusals that rule the quorum out.
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
	var clock uint64
	for i := range b.nodes {
		if c := b.nodes[i].clock; c != nil {
			clock = max(clock, c.ClockReading())
		}
	}
	acq := b.start(ctx, "acquire", timeout, b.all, func(ctx context.Context, n *node) answer {
		var tok uint64
		var ok bool
		var err error
		if n.clock != nil {
			tok, ok, err = n.clock.AcquireAt(ctx, key, owner, ttl, clock)
		} else {
			tok, ok, err = n.b.Acquire(ctx, key, owner, ttl)
		}
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
	r.refusable = false // a shortfall is an error, whatever the nodes said
	r.wait(b, b.quorum, time.Now().Add(timeout))
	if r.yes >= b.quorum {
		return nil
	}
	return r.quorumError(b)
}
