package redlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Release implements driver.Backend. It goes to every node, including
// those that did not grant the lock (a grant may have landed after its
// node timed out), waits for all of them up to the node timeout, and
// returns true when a quorum released it, false when so many nodes did
// not hold it that no quorum could have, and a *QuorumError when too many
// nodes failed to tell.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	ok, _, err := b.release(ctx, key, owner, driver.NoticeIfTried)
	return ok, err
}

// ReleaseNotice implements driver.NoticeReleaser: Release with every
// node's release notice sent as n says (on nodes that send it only when
// someone tried to take the lock, driver.NoticeReleaser), and whether
// some node said someone had (nodes that cannot tell count as told).
func (b *Backend) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	return b.release(ctx, key, owner, n)
}

func (b *Backend) release(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	if err := b.check(ctx, 0); err != nil {
		return false, false, err
	}
	late := b.pending.lookup(key, owner) // an acquisition still answering
	var told atomic.Bool
	r := b.start(ctx, "release", b.cfg.nodeTimeout, b.all, func(ctx context.Context, nd *node) answer {
		a, t := b.releaseAfter(ctx, late, nd.index, key, owner, n)
		if t {
			told.Store(true)
		}
		return a
	})
	// Every node's answer is awaited (up to the node timeout): once Release
	// returns, every node that answers is free for the next owner, which
	// early return would leave to chance when a minority lags.
	r.wait(b, 0, time.Now().Add(b.cfg.nodeTimeout))
	ok, err = r.verdict(b)
	b.observe(ctx, "release", err == nil)
	return ok, told.Load(), err
}

// RaiseFence implements driver.Fencer, so that a Redlock can itself be a
// member of a Redlock: it raises the fence on every node and succeeds when
// a quorum of them holds the lock for owner; every later acquisition's
// quorum then meets one of them. It fails if a node cannot raise tokens
// (possible only with WithoutFencing).
func (b *Backend) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	if err := b.check(ctx, 0); err != nil {
		return false, err
	}
	for _, n := range b.nodes {
		if n.fencer == nil {
			return false, fmt.Errorf("%w: redlock %s cannot raise fencing tokens (driver.Fencer)", turnstile.ErrInvalidOption, n.name)
		}
	}
	r := b.start(ctx, "raise fence", b.cfg.nodeTimeout, b.all, func(ctx context.Context, n *node) answer {
		ok, err := n.fencer.RaiseFence(ctx, key, owner, token)
		return answer{yes: ok && err == nil, err: err}
	})
	r.wait(b, b.quorum, time.Now().Add(b.cfg.nodeTimeout))
	return r.verdict(b)
}
