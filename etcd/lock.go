package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Acquire implements driver.Backend: it grants a lease with ttl (rounded
// up to whole seconds) and writes the lock key under it if the key does
// not exist, or if owner already holds it. A failed attempt revokes the
// lease.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	defer func() { err = permission(err, "take the lock "+b.LockKey(key)) }()
	lease, err := b.cli.Grant(ctx, leaseSeconds(ttl))
	if err != nil {
		return 0, false, err
	}
	tok, ok, _, err := b.take(ctx, b.LockKey(key), owner, lease.ID)
	if err != nil || !ok {
		// On an error the lock may have been written; revoking the lease
		// removes it then, and an orphaned lease otherwise.
		b.revoke(ctx, lease.ID)
	}
	return tok, ok, err
}

// take writes lk = owner under lease id if lk is free or already owner's,
// in one transaction, together with more (more writes on other keys). It
// returns the token and, when another owner holds lk, the store revision
// at which it was seen held.
func (b *Backend) take(ctx context.Context, lk, owner string, id clientv3.LeaseID, more ...clientv3.Op) (token uint64, ok bool, rev int64, err error) {
	put := clientv3.OpPut(lk, owner, clientv3.WithLease(id), clientv3.WithPrevKV())
	then := append([]clientv3.Op{put}, more...)
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(lk), "=", 0)).
		Then(then...).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(lk), "=", owner)},
			then,
			nil,
		)).Commit()
	if err != nil {
		return 0, false, 0, err
	}
	if resp.Succeeded {
		return uint64(resp.Header.Revision), true, 0, nil
	}
	inner := resp.Responses[0].GetResponseTxn()
	if !inner.Succeeded {
		return 0, false, resp.Header.Revision, nil
	}
	// owner held lk already (a retry after a lost reply): the re-grant's
	// revision is the new, larger token, and the old lease is left
	// without a key.
	if prev := inner.Responses[0].GetResponsePut().GetPrevKv(); prev != nil && prev.Lease != 0 && clientv3.LeaseID(prev.Lease) != id {
		b.revoke(ctx, clientv3.LeaseID(prev.Lease))
	}
	return uint64(resp.Header.Revision), true, 0, nil
}

// Extend implements driver.Backend. It checks that owner holds key, then
// renews the key's lease. When ttl needs more seconds than the lease was
// granted, the key moves to a new lease with the longer TTL (extendKeys,
// as for the lock kinds' keys).
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	defer func() { err = permission(err, "renew the lock "+b.LockKey(key)) }()
	lk := b.LockKey(key)
	return b.extendKeys(ctx, clientv3.Compare(clientv3.Value(lk), "=", owner), []string{lk}, ttl)
}

// Release implements driver.Backend: it reads the lock key's lease if
// owner holds the key, then revokes that lease, which deletes the key
// (releaseLease, as for the lock kinds' holds). Each lease belongs to one
// grant of one lock, so revoking it can never remove a lock someone else
// took meanwhile; and the read costs no write to etcd's log, the revoke
// one.
func (b *Backend) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	defer func() { err = permission(err, "release the lock "+b.LockKey(key)) }()
	lk := b.LockKey(key)
	return b.releaseLease(ctx, lk, clientv3.Compare(clientv3.Value(lk), "=", owner))
}

// revoke drops a lease that no longer holds a lock, even when ctx is
// done. It waits for the revocation only as long as ctx allows — a
// caller's deadline holds even when the cluster cannot answer — and the
// revocation goes on in the background for up to cleanupCtx's bound, or
// until Close. Failure is harmless: the lease then expires after its TTL,
// and it holds no lock key.
func (b *Backend) revoke(ctx context.Context, id clientv3.LeaseID) {
	done := make(chan struct{})
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		defer close(done)
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-cctx.Done():
			}
		}()
		_, _ = b.cli.Revoke(cctx, id)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
