package etcd

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
)

// ReadLock is the read side of a Backend's read-write lock, after etcd's
// own recipes.RWMutex, whose two sides turnstile.ReadWrite returns
// (ReadLock and WriteLock), each a driver.Backend for a Client of its
// own: any number of readers hold a key together, or one writer holds it
// alone. Its writers queue in order, so turnstile.WithWriterClaim has no
// effect here.
//
// Keys for key K, under <prefix>rw/<escaped K>/: readers/<owner>, one
// per reader, each under its lease; writer, the writer's owner under its
// lease; queue/<owner>, the writers waiting, each under its waiting
// lease, in the order of their create revisions. Every grant is one
// transaction that checks the others: a reader enters only while there
// is no writer and no writer waits; a writer only while there is no
// writer and no reader. Tokens are the revisions of those writes, for
// readers and writers alike.
//
// Policy: writer preference. A waiting writer (driver.Queuer) writes its
// queue key first, and while any writer waits no new reader gets in;
// readers already inside finish (or expire), then the writers enter one
// at a time in arrival order. So a steady stream of readers cannot
// starve writers. A waiting writer that crashed keeps new readers out
// until its waiting lease expires (its TTL). Waiting readers watch the
// lock's directory and enter as soon as no writer holds or waits. A
// writer's TryAcquire does not queue and leaves no claim. A reader
// cannot upgrade to a writer: it would wait for itself.
//
// The read side is driver.Shared: a Client's waiting readers wait on
// their own rather than in its local line, so they enter together.
type ReadLock struct{ rw *rwLock }

// rwLock is a read-write lock of a Backend, shared by its two sides.
type rwLock struct {
	b *Backend
}

// rwKeys are the etcd keys of one read-write lock.
type rwKeys struct {
	dir, readers, writer, queue string
}

// notReader reports whether key is not a reader's.
func (k rwKeys) notReader(key string) bool { return !strings.HasPrefix(key, k.readers) }

// notQueued reports whether key is not a waiting writer's.
func (k rwKeys) notQueued(key string) bool { return !strings.HasPrefix(key, k.queue) }

func (rw *rwLock) keys(key string) rwKeys {
	dir := rw.b.kindDir("rw", key)
	return rwKeys{dir: dir, readers: dir + "readers/", writer: dir + "writer", queue: dir + "queue/"}
}

// acquire takes a side's lock on a key for owner without waiting: take
// takes it with a lease granted for ttl, which is revoked unless take
// took the lock.
func (rw *rwLock) acquire(ctx context.Context, owner string, ttl time.Duration, take func(clientv3.LeaseID) (uint64, bool, int64, error)) (uint64, bool, error) {
	if err := checkOwner(owner); err != nil {
		return 0, false, err
	}
	lease, err := rw.b.cli.Grant(ctx, leaseSeconds(ttl))
	if err != nil {
		return 0, false, err
	}
	tok, ok, _, err := take(lease.ID)
	if err != nil || !ok {
		rw.b.revoke(ctx, lease.ID)
	}
	return tok, ok, err
}

var (
	_ driver.Backend = (*ReadLock)(nil)
	_ driver.Queuer  = (*ReadLock)(nil)
	_ driver.Namer   = (*ReadLock)(nil)
	_ driver.Shared  = (*ReadLock)(nil)
)

// Name implements driver.Namer.
func (r *ReadLock) Name() string { return r.rw.b.Name() + " read lock" }

// Shared implements driver.Shared: many readers hold the lock at once.
func (r *ReadLock) Shared() bool { return true }

// Acquire implements driver.Backend: it succeeds unless a writer holds
// key or waits for it.
func (r *ReadLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	k := r.rw.keys(key)
	defer func() { err = permission(err, "take the read lock "+k.readers) }()
	return r.rw.acquire(ctx, owner, ttl, func(id clientv3.LeaseID) (uint64, bool, int64, error) {
		return r.take(ctx, k, owner, id)
	})
}

// AcquireWait implements driver.Queuer: the reader waits, watching the
// lock's directory, until no writer holds key or waits for it.
func (r *ReadLock) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	k := r.rw.keys(key)
	defer func() { err = permission(err, "wait for the read lock "+k.readers) }()
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	w, err := r.rw.b.newWaiter(ctx, ttl)
	if err != nil {
		return 0, err
	}
	tok, err := func() (uint64, error) {
		for {
			tok, ok, rev, err := r.take(ctx, k, owner, w.id)
			if err != nil || ok {
				return tok, err
			}
			// Readers leaving change nothing for a waiting reader.
			if err := w.waitFor(ctx, k.dir, true, rev+1, k.notReader); err != nil {
				return 0, err
			}
		}
	}()
	return r.rw.b.waitDone(ctx, w, tok, err)
}

// take writes owner's read lease under lease id if no writer holds or
// waits; otherwise it returns the revision at which it saw one.
func (r *ReadLock) take(ctx context.Context, k rwKeys, owner string, id clientv3.LeaseID) (uint64, bool, int64, error) {
	mine := k.readers + ownerName(owner)
	resp, err := r.rw.b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.writer), "=", 0), empty(k.queue)).
		Then(clientv3.OpPut(mine, owner, clientv3.WithLease(id), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return 0, false, 0, err
	}
	if !resp.Succeeded {
		return 0, false, resp.Header.Revision, nil
	}
	if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev != nil && prev.Lease != 0 && clientv3.LeaseID(prev.Lease) != id {
		r.rw.b.revoke(ctx, clientv3.LeaseID(prev.Lease))
	}
	return uint64(resp.Header.Revision), true, 0, nil
}

// Extend implements driver.Backend: it renews owner's read lease only.
func (r *ReadLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	k := r.rw.keys(key)
	defer func() { err = permission(err, "renew the read lock "+k.readers) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	mine := k.readers + ownerName(owner)
	return r.rw.b.extendKeys(ctx, clientv3.Compare(clientv3.CreateRevision(mine), ">", 0), []string{mine}, ttl)
}

// Release implements driver.Backend: it ends owner's read lease.
func (r *ReadLock) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	k := r.rw.keys(key)
	defer func() { err = permission(err, "release the read lock "+k.readers) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	mine := k.readers + ownerName(owner)
	return r.rw.b.releaseLease(ctx, mine, clientv3.Compare(clientv3.CreateRevision(mine), ">", 0))
}

// WriteLock is the write side of the read-write lock ReadLock describes.
type WriteLock struct{ rw *rwLock }

var (
	_ driver.Backend = (*WriteLock)(nil)
	_ driver.Queuer  = (*WriteLock)(nil)
	_ driver.Namer   = (*WriteLock)(nil)
)

// Name implements driver.Namer.
func (w *WriteLock) Name() string { return w.rw.b.Name() + " write lock" }

// Acquire implements driver.Backend: it succeeds when no other writer
// and no reader holds key. It does not queue.
func (w *WriteLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	k := w.rw.keys(key)
	defer func() { err = permission(err, "take the write lock "+k.writer) }()
	return w.rw.acquire(ctx, owner, ttl, func(id clientv3.LeaseID) (uint64, bool, int64, error) {
		return w.take(ctx, k, owner, id)
	})
}

// AcquireWait implements driver.Queuer: the writer writes its queue key,
// which keeps new readers out, waits until the writers queued before it
// have gone, then until no reader and no writer holds key, and takes the
// lock and leaves the queue in one transaction. Its place in the queue
// of writers is reported (driver.PositionFunc).
func (w *WriteLock) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	k := w.rw.keys(key)
	defer func() { err = permission(err, "queue for the write lock "+k.writer) }()
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	wt, err := w.rw.b.newWaiter(ctx, ttl)
	if err != nil {
		return 0, err
	}
	tok, err := func() (uint64, error) {
		me := k.queue + ownerName(owner)
		place, err := wt.place(ctx, me, owner)
		if err != nil {
			return 0, err
		}
		if err := wt.awaitTurn(ctx, k.queue, place); err != nil {
			return 0, err
		}
		for {
			tok, ok, rev, err := w.take(ctx, k, owner, wt.id, clientv3.OpDelete(me))
			if err != nil || ok {
				return tok, err
			}
			// Writers queued behind it leaving change nothing for it.
			if err := wt.waitFor(ctx, k.dir, true, rev+1, k.notQueued); err != nil {
				return 0, err
			}
		}
	}()
	return w.rw.b.waitDone(ctx, wt, tok, err)
}

// take writes the writer key for owner under lease id, with more, if no
// reader and no other writer holds key (or owner holds it already: a
// retry); otherwise it returns the revision at which it saw them.
func (w *WriteLock) take(ctx context.Context, k rwKeys, owner string, id clientv3.LeaseID, more ...clientv3.Op) (uint64, bool, int64, error) {
	then := append([]clientv3.Op{clientv3.OpPut(k.writer, owner, clientv3.WithLease(id), clientv3.WithPrevKV())}, more...)
	resp, err := w.rw.b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.writer), "=", 0), empty(k.readers)).
		Then(then...).
		Else(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k.writer), "=", owner)}, then, nil)).
		Commit()
	if err != nil {
		return 0, false, 0, err
	}
	put := resp.Responses[0].GetResponsePut()
	if !resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		if !inner.Succeeded {
			return 0, false, resp.Header.Revision, nil
		}
		put = inner.Responses[0].GetResponsePut()
	}
	if prev := put.GetPrevKv(); prev != nil && prev.Lease != 0 && clientv3.LeaseID(prev.Lease) != id {
		w.rw.b.revoke(ctx, clientv3.LeaseID(prev.Lease))
	}
	return uint64(resp.Header.Revision), true, 0, nil
}

// Extend implements driver.Backend.
func (w *WriteLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	k := w.rw.keys(key)
	defer func() { err = permission(err, "renew the write lock "+k.writer) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	return w.rw.b.extendKeys(ctx, clientv3.Compare(clientv3.Value(k.writer), "=", owner), []string{k.writer}, ttl)
}

// Release implements driver.Backend.
func (w *WriteLock) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	k := w.rw.keys(key)
	defer func() { err = permission(err, "release the write lock "+k.writer) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	return w.rw.b.releaseLease(ctx, k.writer, clientv3.Compare(clientv3.Value(k.writer), "=", owner))
}
