package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
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
	lease, err := b.cli.Grant(ctx, leaseSeconds(ttl))
	if err != nil {
		return 0, err
	}
	w := &waiter{b: b, id: lease.ID, renew: max(time.Duration(lease.TTL)*time.Second/3, 100*time.Millisecond)}
	tok, err := w.wait(ctx, key, owner)
	if err != nil {
		b.revoke(ctx, lease.ID)
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(cerr, err)
		}
		return 0, err
	}
	return tok, nil
}

// waiter is one AcquireWait call.
type waiter struct {
	b     *Backend
	id    clientv3.LeaseID // holds the waiter key, then the lock key
	renew time.Duration    // how often the lease is renewed while waiting
}

func (w *waiter) wait(ctx context.Context, key, owner string) (uint64, error) {
	dir := w.b.queuePrefix(key)
	me := dir + owner
	put, err := w.b.cli.Put(ctx, me, owner, clientv3.WithLease(w.id), clientv3.WithPrevKV())
	if err != nil {
		return 0, err
	}
	place := put.Header.Revision
	if put.PrevKv != nil {
		place = put.PrevKv.CreateRevision // same owner queued already: keep its place
	}

	// Wait until nobody who came earlier is still queued. Each pass
	// watches only the nearest predecessor, so a release wakes one waiter.
	report, last := driver.PositionFunc(ctx), 0
	for {
		prev, err := w.predecessors(ctx, dir, place, report != nil)
		if err != nil {
			return 0, err
		}
		if report != nil && len(prev.Kvs)+1 != last {
			// Its place: the waiters ahead of it, then the holder.
			last = len(prev.Kvs) + 1
			report(last)
		}
		if len(prev.Kvs) == 0 {
			break
		}
		// A waiter that counts its place watches the whole line, so
		// that it sees every waiter ahead leave; the others watch only
		// their nearest predecessor.
		watch, opts := string(prev.Kvs[len(prev.Kvs)-1].Key), []clientv3.OpOption(nil)
		if report != nil {
			watch, opts = dir, []clientv3.OpOption{clientv3.WithPrefix()}
		}
		if err := w.waitDelete(ctx, watch, prev.Header.Revision+1, opts...); err != nil {
			return 0, err
		}
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
		if err := w.waitDelete(ctx, lk, rev+1); err != nil {
			return 0, err
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

// waitDelete blocks until key (or, with clientv3.WithPrefix in opts, a
// key under it) is deleted at or after revision rev, renewing the
// waiter's lease meanwhile. It also returns (nil) when the revisions it
// watches have been compacted away, so the caller looks again.
func (w *waiter) waitDelete(ctx context.Context, key string, rev int64, opts ...clientv3.OpOption) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.b.cli.Watch(wctx, key, append([]clientv3.OpOption{clientv3.WithRev(rev), clientv3.WithFilterPut()}, opts...)...)
	renew := time.NewTicker(w.renew)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-renew.C:
			if _, err := w.b.cli.KeepAliveOnce(ctx, w.id); err != nil {
				return err
			}
		case wr, ok := <-wch:
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
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}
