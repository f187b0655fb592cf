package etcd

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
)

// errWatchClosed means etcd closed a watch that the waiter's context did
// not end, for example because the client was closed.
var errWatchClosed = errors.New("etcd: watch closed")

// AcquireWait implements driver.Queuer; see AcquireWaitSince.
func (b *Backend) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	tok, _, err := b.AcquireWaitSince(ctx, key, owner, ttl)
	return tok, err
}

// AcquireWaitSince implements driver.TimedQueuer, as etcd's
// concurrency.Mutex waits. One transaction takes the lock if it is free
// and nobody waits for it (or gives it again to owner, who holds it
// already: a retry after a lost reply), or else puts owner's waiter key
// in key's queue, its create revision its place. A waiter then waits
// until the waiter ahead of it has gone and takes the lock key, watching
// it for deletion while another owner, one that did not queue, holds it.
// The waiter key and the lock key are under the backend's shared lease
// of ttl's class, renewed while waiting; leaving the queue deletes the
// waiter key, and the lock if it was granted meanwhile.
//
// since comes from the shared lease: the send time of its last grant or
// renewal etcd answered, less what its TTL has above ttl, and no later
// than the grant's start, from which the sweeper counts the lock's own
// deadline. When that would leave the lock less than nine tenths of ttl
// from the grant, the lease is renewed first: beside the transaction
// when it takes the lock at once, after the wait otherwise. Under a
// steady flow of acquisitions a pair of Acquire and Release is then two
// calls to etcd — the two writes — as concurrency.Mutex's is.
func (b *Backend) AcquireWaitSince(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ time.Time, err error) {
	defer func() { err = permission(err, "queue for the lock "+b.LockKey(key)) }()
	lk, dir := b.LockKey(key), b.queuePrefix(key)
	me := dir + owner
	for try := 1; ; try++ {
		l, fresh, err := b.lease(ctx, leaseSeconds(ttl))
		if err != nil {
			return 0, time.Time{}, err
		}
		put := clientv3.OpPut(lk, owner, clientv3.WithLease(l.id))
		start := time.Now()
		renewed := b.renewing(ctx, l, fresh || l.holds(start, ttl))
		resp, err := b.txn(ctx, lk, owner,
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lk), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()},
			[]clientv3.Op{put},
			[]clientv3.Op{clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(lk), "=", owner)},
				[]clientv3.Op{put, clientv3.OpDelete(me)},
				[]clientv3.Op{clientv3.OpPut(me, owner, clientv3.WithLease(l.id), clientv3.WithPrevKV())},
			)})
		rerr := <-renewed
		switch {
		case leaseGone(err) || (err == nil && rerr == errLeaseLost):
			// The lease ended on the server: the keys were not written,
			// or went with it. Queue again on a new lease.
			b.lost(l)
			if try < leaseRetries {
				continue
			}
			if err == nil {
				err = errLeaseLost
			}
			return 0, time.Time{}, err
		case err == nil:
			err = rerr
		}
		if err != nil {
			b.drop(ctx, lk, owner, me, l.id)
			return 0, time.Time{}, err
		}
		inner := resp.Responses[0].GetResponseTxn()
		if resp.Succeeded || inner.GetSucceeded() {
			if report := driver.PositionFunc(ctx); report != nil {
				report(1)
			}
			b.track(lk, owner, resp.Header.Revision, l.id, start.Add(l.hold()))
			return uint64(resp.Header.Revision), l.since(start, ttl), nil
		}
		place := resp.Header.Revision
		if prev := inner.GetResponses()[0].GetResponsePut().GetPrevKv(); prev != nil {
			place = prev.CreateRevision // owner's waiter key keeps its place
		}
		lw := &localWaiter{owner: owner, qk: me, place: place, lease: l, hold: l.hold(), given: make(chan handoff, 1)}
		w := &waiter{b: b, id: l.id, shared: l, renew: renewEvery(l.ttl), renewed: start, given: lw.given}
		b.waiting.join(key, lw)
		tok, at, err := w.waitPlaced(ctx, key, owner, place)
		b.waiting.leave(key, lw)
		if err == nil && !l.holds(at, ttl) {
			// The lease's last renewal is old: renew it, so that the lock
			// is held for (nearly) ttl from now.
			_, err = b.renewShared(ctx, l)
		}
		if err != nil {
			// The drop also frees the lock if a release handed it over
			// as the wait ended.
			b.drop(ctx, lk, owner, me, l.id)
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				err = errors.Join(cerr, err)
			}
			return 0, time.Time{}, err
		}
		return tok, l.since(at, ttl), nil
	}
}

// waitPlaced waits, as owner's waiter key of key's queue at place, for
// its turn, then takes the lock and leaves the queue in one write. at is
// when the write that granted the lock began: the lock's hold counts
// from then.
func (w *waiter) waitPlaced(ctx context.Context, key, owner string, place int64) (token uint64, at time.Time, err error) {
	dir := w.b.queuePrefix(key)
	me := dir + owner
	// Wait until nobody who came earlier is still queued.
	if err := w.awaitTurn(ctx, dir, place); err != nil {
		if errors.Is(err, errHandedOver) {
			return w.handed.token, w.handed.start, nil
		}
		return 0, time.Time{}, err
	}
	lk := w.b.LockKey(key)
	for {
		// Look before taking: a take that finds the lock held is still a
		// write to etcd's log, and on a busy key the lock is mostly held
		// (by the waiter ahead, handed it by a release).
		held, err := w.b.cli.Get(ctx, lk)
		if err != nil {
			return 0, time.Time{}, err
		}
		if len(held.Kvs) > 0 && string(held.Kvs[0].Value) != owner {
			if err := w.waitFor(ctx, lk, false, held.Header.Revision+1, nil); err != nil {
				if errors.Is(err, errHandedOver) {
					return w.handed.token, w.handed.start, nil
				}
				return 0, time.Time{}, err
			}
		}
		start := time.Now()
		tok, ok, rev, err := w.b.take(ctx, lk, owner, w.id, clientv3.OpDelete(me))
		if leaseGone(err) {
			w.b.lost(w.shared)
			return 0, time.Time{}, errLeaseLost
		}
		if err != nil {
			return 0, time.Time{}, err
		}
		if ok {
			w.b.track(lk, owner, int64(tok), w.id, start.Add(w.shared.hold()))
			return tok, start, nil
		}
		if err := w.waitFor(ctx, lk, false, rev+1, nil); err != nil {
			if errors.Is(err, errHandedOver) {
				return w.handed.token, w.handed.start, nil
			}
			return 0, time.Time{}, err
		}
	}
}
