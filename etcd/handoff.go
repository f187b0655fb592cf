package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A release hands the lock to the backend's own first waiter in the same
// write. Through the store alone, a handoff on a busy key costs two
// writes in a row — the holder's delete, then the next waiter's put,
// after the watch event reached it — and each write waits for etcd's
// log to be fsynced. When the first waiter in key's queue is one of this
// backend's, the release's transaction puts the lock key in that
// waiter's name and deletes its waiter key instead, and the waiter
// learns of it from the releasing goroutine: one write, no watch event
// in between. The transaction checks that the waiter is still queued
// and that no waiter of the queue came before it, so arrival order
// holds across processes; if not, it deletes the lock key as a plain
// release does. The token is the transaction's revision, as for every
// grant.

// errHandedOver ends a waiter's wait: a release gave it the lock.
var errHandedOver = errors.New("etcd: lock handed over")

// localWaiter is one of the backend's waiters in a plain lock's queue.
type localWaiter struct {
	owner string
	qk    string // its waiter key
	place int64  // the waiter key's create revision
	lease *sharedLease
	hold  time.Duration // how long a lock handed to it lasts unless renewed
	given chan handoff  // when a release hands it the lock
}

// handoff is a lock a release gave a waiter.
type handoff struct {
	token uint64
	start time.Time // when the release began: its hold counts from then
}

// lines are the backend's waiters per key, in the order of their places.
type lines struct {
	mu    sync.Mutex
	byKey map[string][]*localWaiter
}

func (ls *lines) join(key string, w *localWaiter) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.byKey == nil {
		ls.byKey = make(map[string][]*localWaiter)
	}
	q := ls.byKey[key]
	i := len(q)
	for i > 0 && q[i-1].place > w.place {
		i--
	}
	q = append(q, nil)
	copy(q[i+1:], q[i:])
	q[i] = w
	ls.byKey[key] = q
}

// leave takes w out of key's line; it reports whether w was there.
func (ls *lines) leave(key string, w *localWaiter) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.byKey[key]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			if len(q) == 0 {
				delete(ls.byKey, key)
			} else {
				ls.byKey[key] = q
			}
			return true
		}
	}
	return false
}

func (ls *lines) first(key string) *localWaiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if q := ls.byKey[key]; len(q) > 0 {
		return q[0]
	}
	return nil
}

// releaseTo deletes lk if owner holds it, or, when w is still queued
// first in line, gives it to w in the same transaction. It reports
// whether owner held lk; handed whether w was given it, with token.
func (b *Backend) releaseTo(ctx context.Context, key, owner string, w *localWaiter) (ok, handed bool, token uint64, err error) {
	lk, dir := b.LockKey(key), b.queuePrefix(key)
	resp, err := b.txn(ctx, lk, owner,
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(lk), "=", owner)},
		[]clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(w.qk), "=", w.place),
				// every waiter came after w
				clientv3.Compare(clientv3.CreateRevision(dir), ">", w.place-1).WithPrefix(),
			},
			[]clientv3.Op{clientv3.OpPut(lk, w.owner, clientv3.WithLease(w.lease.id)), clientv3.OpDelete(w.qk)},
			[]clientv3.Op{clientv3.OpDelete(lk)},
		)},
		nil)
	if err != nil || !resp.Succeeded {
		return false, false, 0, err
	}
	return true, resp.Responses[0].GetResponseTxn().GetSucceeded(), uint64(resp.Header.Revision), nil
}

// release is Release: a handoff to the backend's first waiter for key
// when it has one, else a delete by owner.
func (b *Backend) release(ctx context.Context, key, owner string) (bool, error) {
	if w := b.waiting.first(key); w != nil && w.lease.usable(time.Now()) {
		start := time.Now()
		ok, handed, tok, err := b.releaseTo(ctx, key, owner, w)
		switch {
		case leaseGone(err):
			// The waiter's lease ended, and its waiter key with it: a
			// plain release.
			b.lost(w.lease)
		case err != nil:
			return false, err
		default:
			b.untrack(b.LockKey(key), owner)
			if handed {
				b.track(b.LockKey(key), w.owner, int64(tok), w.lease.id, start.Add(w.hold))
				if b.waiting.leave(key, w) {
					w.given <- handoff{tok, start}
				}
			}
			return ok, nil
		}
	}
	ok, err := b.deleteOwned(ctx, b.LockKey(key), owner, "")
	if err == nil {
		b.untrack(b.LockKey(key), owner)
	}
	return ok, err
}
