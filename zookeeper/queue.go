package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile/driver"
)

// ErrNodeVanished means a waiter's own node disappeared from the queue:
// its session expired, or an operator deleted it.
var ErrNodeVanished = errors.New("zookeeper: lock node vanished while waiting")

// AcquireWait implements driver.Queuer: the owner's node joins the end of
// key's queue and waits, watching only the node just ahead of it, until it
// is first. Each change wakes one waiter, so there is no herd. When ctx is
// done the node leaves the queue (releasing the lock if it was granted
// meanwhile) and the error matches ctx.Err().
func (b *Backend) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	tok, _, err := b.AcquireWaitSince(ctx, key, owner, ttl)
	return tok, err
}

// AcquireWaitSince implements driver.TimedQueuer: AcquireWait, with since
// the send time of the write that marks the node granted, or, for a node
// first in a queue that did not change since it was created (see
// firstToken: no write is needed then), of the look at the queue that
// found it first. ZooKeeper heard the session then, so it keeps the node
// for the session timeout after that at least, and the Backend's own
// timer for the hold starts after it; when the session timeout granted
// is below ttl by then (cut at a reconnection during the wait) since is
// zero, and the Client's renewal finds the hold lost, as it would have.
func (b *Backend) AcquireWaitSince(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ time.Time, err error) {
	defer func() { err = b.permission(err, "queue for the lock in "+b.dir(key)) }()
	if err := b.live(); err != nil {
		return 0, time.Time{}, err
	}
	if err := b.fitTTL(ttl); err != nil {
		return 0, time.Time{}, err
	}
	mine, zxid, err := b.enqueue(ctx, key, owner)
	if err != nil {
		return 0, time.Time{}, err
	}
	if b.beforeList != nil {
		b.beforeList()
	}
	name, eo := path.Base(mine), escape(owner)
	report, last := driver.PositionFunc(ctx), 0
	for look := 1; ; look++ {
		sent := time.Now()
		q, st, err := b.listStat(ctx, b.dir(key))
		if err != nil {
			b.cleanup(mine)
			return 0, time.Time{}, err
		}
		at := -1
		for i, n := range q {
			if n.name == name {
				at = i
				break
			}
		}
		switch {
		case at < 0:
			return 0, time.Time{}, fmt.Errorf("%w: %s", ErrNodeVanished, mine)
		case at == 0 && look == 1 && unchanged(st, zxid):
			// First at the first look, and nothing came or went since
			// the node did: its creation is the grant, and the look
			// itself was heard by the session's server.
			b.arm(holdKey{key, owner}, mine, ttl)
			return uint64(zxid), b.heldSince(sent, ttl), nil
		case at == 0 || q[0].owner == eo:
			tok, since, err := b.granted(ctx, key, owner, mine, q[0], ttl)
			return tok, b.heldSince(since, ttl), err
		}
		dir := b.dir(key)
		if err := b.waitBehind(ctx, mine, dir, dir+"/"+q[at-1].name, q, at, &last, report); err != nil {
			return 0, time.Time{}, err
		}
	}
}

// waitBehind returns when the line q of dir may have moved for the node
// mine, at place at behind the node pred: once pred changes, or, when
// report is set, any node of the line. A waiter that counts its place
// (the nodes ahead of it, the holder's included) watches the whole line,
// so that it sees every node ahead of it go, and reports the place when
// it is not *last; the others watch only their predecessor. On an error,
// or when ctx ends, mine leaves the line.
func (b *Backend) waitBehind(ctx context.Context, mine, dir, pred string, q []node, at int, last *int, report func(int)) error {
	// GetW, unlike ExistsW, leaves no watch behind on a node that is
	// already gone.
	watch := func() (<-chan zk.Event, error) {
		_, _, ch, err := b.conn.GetW(pred)
		return ch, err
	}
	if report != nil {
		if at != *last {
			report(at)
			*last = at
		}
		watch = func() (<-chan zk.Event, error) {
			kids, _, ch, err := b.conn.ChildrenW(dir)
			if err == nil && !sameNodes(queue(kids), q) {
				// The line changed between the listing and the watch,
				// which only sees later changes: look again now instead
				// of waiting for one.
				return nil, zk.ErrNoNode
			}
			return ch, err
		}
	}
	ch, err := call(ctx, watch)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		b.cleanup(mine)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("zookeeper: watch %s: %w", pred, err)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		b.cleanup(mine)
		return ctx.Err()
	}
}

// granted finishes AcquireWait once the owner is first in the queue. The
// token is the zxid of a write made now, so it exceeds every token handed
// out while the owner waited; sent is when that write was sent.
func (b *Backend) granted(ctx context.Context, key, owner, mine string, first node, ttl time.Duration) (_ uint64, sent time.Time, _ error) {
	held := b.dir(key) + "/" + first.name
	if held != mine {
		// The owner already held the key through an earlier node.
		if err := b.remove(ctx, mine); err != nil {
			return 0, time.Time{}, err
		}
	}
	sent = time.Now()
	st, err := call(ctx, func() (*zk.Stat, error) { return b.conn.Set(held, nil, -1) })
	if err != nil {
		b.cleanup(held)
		if ctx.Err() != nil {
			return 0, time.Time{}, ctx.Err()
		}
		return 0, time.Time{}, fmt.Errorf("zookeeper: mark %s granted: %w", held, err)
	}
	b.arm(holdKey{key, owner}, held, ttl)
	return uint64(st.Mzxid), sent, nil
}

// sameNodes reports whether a and b are the same nodes in the same order.
func sameNodes(a, b []node) bool {
	return slices.EqualFunc(a, b, func(x, y node) bool { return x.name == y.name })
}

// heldSince is the since of a grant whose request the session's server
// heard after sent: sent, unless the session timeout granted is below
// ttl by now (zero: the Client's renewal then finds the hold lost).
func (b *Backend) heldSince(sent time.Time, ttl time.Duration) time.Time {
	if sent.IsZero() || b.fitTTL(ttl) != nil {
		return time.Time{}
	}
	return sent
}
