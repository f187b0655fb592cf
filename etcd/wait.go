package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
)

// waiter is one AcquireWait call, of the plain lock or of a view: a
// lease that holds the waiter's queue key and, once granted, its lock,
// renewed on schedule however often the waiter is woken.
type waiter struct {
	b       *Backend
	id      clientv3.LeaseID
	shared  *sharedLease   // the plain lock's waiters: id is this shared lease
	given   <-chan handoff // the plain lock's waiters: a release handed it the lock
	handed  handoff        // the lock given
	renew   time.Duration  // how often the lease is renewed while waiting
	renewed time.Time      // when the lease was granted or last renewed
}

// newWaiter grants a waiting lease with ttl.
func (b *Backend) newWaiter(ctx context.Context, ttl time.Duration) (*waiter, error) {
	lease, err := b.cli.Grant(ctx, leaseSeconds(ttl))
	if err != nil {
		return nil, err
	}
	return &waiter{b: b, id: lease.ID, renew: renewEvery(lease.TTL), renewed: time.Now()}, nil
}

// renewEvery is how often a waiter renews a lease of ttl seconds.
func renewEvery(ttl int64) time.Duration {
	return max(time.Duration(ttl)*time.Second/3, 100*time.Millisecond)
}

// waitDone ends an AcquireWait: on an error it revokes the waiting
// lease, which drops its queue key and any lock granted meanwhile, and
// joins ctx's error.
func (b *Backend) waitDone(ctx context.Context, w *waiter, tok uint64, err error) (uint64, error) {
	if err == nil {
		return tok, nil
	}
	b.revoke(ctx, w.id)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(cerr, err)
	}
	return 0, err
}

// place joins the queue at key qk under the waiter's lease and returns
// the create revision that is its place; a waiter key of the same owner
// keeps its place.
func (w *waiter) place(ctx context.Context, qk, owner string) (int64, error) {
	put, err := w.b.cli.Put(ctx, qk, owner, clientv3.WithLease(w.id), clientv3.WithPrevKV())
	if err != nil {
		return 0, err
	}
	if put.PrevKv != nil {
		return put.PrevKv.CreateRevision, nil
	}
	return put.Header.Revision, nil
}

// awaitTurn waits until no key of queue dir was created before place,
// watching only the nearest predecessor, so that a departure wakes one
// waiter, and reports the waiter's place (1 = next) to the context's
// driver.PositionFunc whenever it changes.
func (w *waiter) awaitTurn(ctx context.Context, dir string, place int64) error {
	report, last := driver.PositionFunc(ctx), 0
	for {
		prev, err := w.predecessors(ctx, dir, place, report != nil)
		if err != nil {
			return err
		}
		if report != nil && len(prev.Kvs)+1 != last {
			// Its place: the waiters ahead of it, then the holder.
			last = len(prev.Kvs) + 1
			report(last)
		}
		if len(prev.Kvs) == 0 {
			return nil
		}
		// A waiter that counts its place watches the whole line, so that
		// it sees every waiter ahead leave.
		watch, prefix := string(prev.Kvs[len(prev.Kvs)-1].Key), false
		if report != nil {
			watch, prefix = dir, true
		}
		if err := w.waitFor(ctx, watch, prefix, prev.Header.Revision+1, nil); err != nil {
			return err
		}
	}
}

// predecessors reads the waiter keys of dir created before place, the
// nearest last: only the nearest one, unless all are wanted to count the
// waiter's place in line (keys only, one range read of the queue).
func (w *waiter) predecessors(ctx context.Context, dir string, place int64, all bool) (*clientv3.GetResponse, error) {
	if !all {
		return w.b.cli.Get(ctx, dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(place-1))...)
	}
	return w.b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithMaxCreateRev(place-1))
}

// waitFor blocks until key (with prefix, a key under it) is deleted at
// or after revision rev — only a key wake accepts, when wake is not nil
// — renewing the waiter's lease on schedule meanwhile. It also returns
// (nil) when the revisions it looks at have been compacted away, so the
// caller looks again.
//
// It does not ask the watch for the revisions from rev on: a watch that
// starts in the past joins etcd's unsynced watchers, which the server
// catches up only every 100 ms, so on a cluster that wrote anything
// since rev the waiter would wake up to 100 ms after the release. The
// watch starts where the store is when it opens, and one read looks for
// a delete between rev and then.
func (w *waiter) waitFor(ctx context.Context, key string, prefix bool, rev int64, wake func(key string) bool) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	if w.b.beforeWatch != nil {
		w.b.beforeWatch()
	}
	w.b.hold.hold(w.b)
	wch := w.b.cli.Watch(wctx, key, opts...)
	for {
		if err := w.keepAlive(ctx); err != nil {
			return err
		}
		timer := time.NewTimer(time.Until(w.renewed.Add(w.renew)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		case h := <-w.given:
			timer.Stop()
			w.handed = h
			return errHandedOver
		case wr, ok := <-wch:
			timer.Stop()
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return errWatchClosed
			}
			if wr.CompactRevision != 0 {
				return nil
			}
			if err := wr.Err(); err != nil {
				return err
			}
			if wr.Created {
				if gone, err := w.deletedBetween(ctx, key, prefix, rev, wr.Header.Revision, wake); err != nil || gone {
					return err
				}
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE && (wake == nil || wake(string(ev.Kv.Key))) {
					return nil
				}
			}
		}
	}
}

// deletedBetween reports whether key (with prefix, a key under it) that
// existed at revision from-1 — one wake accepts, when wake is not nil —
// was deleted by revision to: whether it is gone at to, or was created
// again. One read of both revisions; true also when from-1 has been
// compacted away, so that the caller looks again.
func (w *waiter) deletedBetween(ctx context.Context, key string, prefix bool, from, to int64, wake func(key string) bool) (bool, error) {
	if to < from {
		return false, nil // the watch began before from: it sends every delete
	}
	opts := []clientv3.OpOption{clientv3.WithKeysOnly()}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	resp, err := w.b.cli.Txn(ctx).Then(
		clientv3.OpGet(key, append(opts, clientv3.WithRev(from-1))...),
		clientv3.OpGet(key, append(opts, clientv3.WithRev(to))...),
	).Commit()
	if errors.Is(err, rpctypes.ErrCompacted) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	now := make(map[string]int64)
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		now[string(kv.Key)] = kv.CreateRevision
	}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		if now[string(kv.Key)] != kv.CreateRevision && (wake == nil || wake(string(kv.Key))) {
			return true, nil
		}
	}
	return false, nil
}

// keepAlive renews the waiting lease when it is due.
func (w *waiter) keepAlive(ctx context.Context) error {
	if time.Since(w.renewed) < w.renew {
		return nil
	}
	if w.shared != nil {
		if _, err := w.b.renewShared(ctx, w.shared); err != nil {
			return err
		}
	} else if _, err := w.b.ka.renew(ctx, w.id); err != nil {
		return err
	}
	w.renewed = time.Now()
	return nil
}
