package etcd

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errWatchClosed means etcd closed a watch that the waiter's context did
// not end, for example because the client was closed.
var errWatchClosed = errors.New("etcd: watch closed")

// AcquireWait implements driver.Queuer, as etcd's concurrency.Mutex
// does: owner joins key's queue with a waiter key whose create revision
// is its place, waits until the waiter ahead of it has gone, then takes
// the lock key (waiting for its deletion while another owner, one that
// did not queue, holds it). The waiter key and the lock key share one
// lease with ttl, renewed while waiting; leaving the queue revokes it,
// which also releases the lock if it was granted meanwhile.
func (b *Backend) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	defer func() { err = permission(err, "queue for the lock "+b.LockKey(key)) }()
	w, err := b.newWaiter(ctx, ttl)
	if err != nil {
		return 0, err
	}
	tok, err := w.wait(ctx, key, owner)
	return b.waitDone(ctx, w, tok, err)
}

func (w *waiter) wait(ctx context.Context, key, owner string) (uint64, error) {
	dir := w.b.queuePrefix(key)
	me := dir + owner
	place, err := w.place(ctx, me, owner)
	if err != nil {
		return 0, err
	}
	// Wait until nobody who came earlier is still queued.
	if err := w.awaitTurn(ctx, dir, place); err != nil {
		return 0, err
	}

	// First in line: take the lock and leave the queue in one write.
	lk := w.b.LockKey(key)
	for {
		tok, ok, rev, err := w.b.take(ctx, lk, owner, w.id, clientv3.OpDelete(me))
		if err != nil {
			return 0, err
		}
		if ok {
			return tok, nil
		}
		if err := w.waitFor(ctx, lk, false, rev+1, nil); err != nil {
			return 0, err
		}
	}
}
