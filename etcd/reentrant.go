package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
)

// Reentrant is the view of a Backend that turnstile.Reentrant returns:
// locks the same owner may take again while it holds them, without
// waiting for itself. Each acquisition counts: the owner must release as
// many times as it acquired, and only the last release frees the lock.
// Owner identity is explicit — give the Client turnstile.WithOwner(id)
// for the calls that may nest; without it every lease has a fresh owner
// and nothing nests.
//
// The lock on key K is two etcd keys under one lease,
// <prefix>reentrant/<escaped K>/holder (the owner) and …/count (its
// acquisitions, counted with compare-and-swap on the count's revision).
// The token is the revision that created the holder key, and every
// re-entry returns it again. The first acquisition grants the lease; a
// re-entry renews it, and moves both keys to a longer lease when its
// TTL needs more, so a re-entry and Extend make the lock live at least
// their TTL from now, never cutting another lease of the owner short.
// The last release deletes both keys in one transaction and revokes the
// lease.
//
// Waiting (driver.Queuer): an owner that holds the lock re-enters at
// once; any other queues under …/queue/ as the plain lock's waiters do,
// watching only its predecessor, and takes the lock in arrival order.
type Reentrant struct {
	b *Backend
}

var (
	_ driver.Backend = (*Reentrant)(nil)
	_ driver.Queuer  = (*Reentrant)(nil)
	_ driver.Namer   = (*Reentrant)(nil)
)

// Name implements driver.Namer.
func (r *Reentrant) Name() string { return r.b.Name() + " reentrant" }

// keys are the holder and count keys of key's lock and its queue.
func (r *Reentrant) keys(key string) (holder, count, queue string) {
	dir := r.b.kindDir("reentrant", key)
	return dir + "holder", dir + "count", dir + "queue/"
}

// Acquire implements driver.Backend. If owner holds key already, it
// counts one more acquisition, renews the lock for ttl and returns the
// token of the first. It grants a lease only when the lock is free.
func (r *Reentrant) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	holder, _, _ := r.keys(key)
	defer func() { err = permission(err, "take the reentrant lock "+holder) }()
	if err := checkOwner(owner); err != nil {
		return 0, false, err
	}
	lease := &lazyLease{b: r.b, ttl: ttl}
	tok, ok, again, held, err := r.take(ctx, key, owner, lease.get)
	if err != nil || !ok || again {
		lease.revoke(ctx)
	}
	if err != nil || !ok {
		return 0, false, err
	}
	if again {
		if ok, err := r.renew(ctx, key, owner, held, ttl); err != nil || !ok {
			return 0, false, err
		}
	}
	return tok, true, nil
}

// AcquireWait implements driver.Queuer: a holding owner re-enters at
// once; any other waits in key's queue.
func (r *Reentrant) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	holder, _, queue := r.keys(key)
	defer func() { err = permission(err, "queue for the reentrant lock "+holder) }()
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	w, err := r.b.newWaiter(ctx, ttl)
	if err != nil {
		return 0, err
	}
	tok, err := r.wait(ctx, w, key, owner, ttl, holder, queue)
	return r.b.waitDone(ctx, w, tok, err)
}

func (r *Reentrant) wait(ctx context.Context, w *waiter, key, owner string, ttl time.Duration, holder, queue string) (uint64, error) {
	lease := func(context.Context) (clientv3.LeaseID, error) { return w.id, nil }
	// Re-entry only: a free lock goes to the waiters queued already.
	tok, ok, again, held, err := r.take(ctx, key, owner, nil)
	if err != nil {
		return 0, err
	}
	if !ok {
		me := queue + ownerName(owner)
		place, err := w.place(ctx, me, owner)
		if err != nil {
			return 0, err
		}
		if err := w.awaitTurn(ctx, queue, place); err != nil {
			return 0, err
		}
		for {
			tok, ok, again, held, err = r.take(ctx, key, owner, lease, clientv3.OpDelete(me))
			if err != nil {
				return 0, err
			}
			if ok {
				break
			}
			if err := w.waitFor(ctx, holder, false, int64(held)+1, nil); err != nil {
				return 0, err
			}
		}
	}
	if again {
		// The owner held the lock already: the waiting lease is not
		// needed; the lock's own lease is renewed for ttl.
		r.b.revoke(ctx, w.id)
		if ok, err := r.renew(ctx, key, owner, held, ttl); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("etcd: reentrant lock %s ended while it was re-entered", holder)
			}
			return 0, err
		}
	}
	return tok, nil
}

// take reads key's lock and writes it for owner, together with more,
// under the lease from lease if it is free (unless lease is nil); or, if
// owner holds it, counts one more acquisition (again=true) and returns
// the lock's lease as held. When another owner holds the lock (or it is
// free and lease nil) it returns ok=false and the revision at which it
// was read, as held.
func (r *Reentrant) take(ctx context.Context, key, owner string, lease func(context.Context) (clientv3.LeaseID, error), more ...clientv3.Op) (token uint64, ok, again bool, held int64, err error) {
	holder, count, _ := r.keys(key)
	mine := clientv3.Compare(clientv3.Value(holder), "=", owner)
	for {
		resp, err := r.b.cli.Txn(ctx).Then(clientv3.OpGet(holder), clientv3.OpGet(count)).Commit()
		if err != nil {
			return 0, false, false, 0, err
		}
		hk := resp.Responses[0].GetResponseRange().GetKvs()
		if len(hk) == 0 && lease == nil {
			return 0, false, false, resp.Header.Revision, nil
		}
		if len(hk) == 0 {
			id, err := lease(ctx)
			if err != nil {
				return 0, false, false, 0, err
			}
			put, err := r.b.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(holder), "=", 0)).
				Then(append([]clientv3.Op{
					clientv3.OpPut(holder, owner, clientv3.WithLease(id)),
					clientv3.OpPut(count, "1", clientv3.WithLease(id)),
				}, more...)...).
				Commit()
			if err != nil {
				return 0, false, false, 0, err
			}
			if put.Succeeded {
				return uint64(put.Header.Revision), true, false, 0, nil
			}
			continue // taken meanwhile: look again
		}
		if string(hk[0].Value) != owner {
			return 0, false, false, resp.Header.Revision, nil
		}
		n, cmp, err := readCount(count, resp.Responses[1].GetResponseRange().GetKvs())
		if err != nil {
			return 0, false, false, 0, err
		}
		up, err := r.b.cli.Txn(ctx).
			If(mine, cmp).
			Then(append([]clientv3.Op{clientv3.OpPut(count, strconv.FormatInt(n+1, 10), clientv3.WithIgnoreLease())}, more...)...).
			Commit()
		if err != nil {
			return 0, false, false, 0, err
		}
		if up.Succeeded {
			return uint64(hk[0].CreateRevision), true, true, hk[0].Lease, nil
		}
		// The same owner acquired or released meanwhile: look again.
	}
}

// readCount parses the count key read as kvs, and returns the comparison
// that holds while it is unchanged. A missing count counts 1.
func readCount(count string, kvs []*mvccpb.KeyValue) (int64, clientv3.Cmp, error) {
	if len(kvs) == 0 {
		return 1, clientv3.Compare(clientv3.CreateRevision(count), "=", 0), nil
	}
	n, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil || n < 1 {
		return 0, clientv3.Cmp{}, fmt.Errorf("etcd: the reentrant count %s holds %q, not a positive number", count, kvs[0].Value)
	}
	return n, clientv3.Compare(clientv3.ModRevision(count), "=", kvs[0].ModRevision), nil
}

// renew makes owner's lock on key, held under lease (0: unknown), live
// at least ttl from now.
func (r *Reentrant) renew(ctx context.Context, key, owner string, lease int64, ttl time.Duration) (bool, error) {
	holder, count, _ := r.keys(key)
	if lease != 0 {
		// Renewing the lease the lock was just seen under spares a read.
		granted, err := r.b.ka.renew(ctx, clientv3.LeaseID(lease))
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if granted >= leaseSeconds(ttl) {
			return true, nil
		}
	}
	return r.b.extendKeys(ctx, clientv3.Compare(clientv3.Value(holder), "=", owner), []string{holder, count}, ttl)
}

// Extend implements driver.Backend: it renews the whole hold, whatever
// the count.
func (r *Reentrant) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	holder, _, _ := r.keys(key)
	defer func() { err = permission(err, "renew the reentrant lock "+holder) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	return r.renew(ctx, key, owner, 0, ttl)
}

// Release implements driver.Backend: it takes back one acquisition of
// owner, and frees key with the last one. It returns ok=false if owner
// does not hold key.
func (r *Reentrant) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	holder, count, _ := r.keys(key)
	defer func() { err = permission(err, "release the reentrant lock "+holder) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	mine := clientv3.Compare(clientv3.Value(holder), "=", owner)
	for {
		resp, err := r.b.cli.Txn(ctx).If(mine).Then(clientv3.OpGet(count)).Commit()
		if err != nil || !resp.Succeeded {
			return false, err
		}
		n, cmp, err := readCount(count, resp.Responses[0].GetResponseRange().GetKvs())
		if err != nil {
			return false, err
		}
		if n > 1 {
			down, err := r.b.cli.Txn(ctx).If(mine, cmp).
				Then(clientv3.OpPut(count, strconv.FormatInt(n-1, 10), clientv3.WithIgnoreLease())).Commit()
			if err != nil {
				return false, err
			}
			if down.Succeeded {
				return true, nil
			}
			continue
		}
		ok, err := r.b.releaseKeys(ctx, []string{holder, count}, mine, cmp)
		if err != nil || ok {
			return ok, err
		}
		// Changed meanwhile: look again (ok=false if it is no longer
		// owner's).
	}
}
