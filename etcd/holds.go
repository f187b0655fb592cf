package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A hold — the plain lock's key, a lock kind's holder key — is one or
// more etcd keys under one lease of its own, renewed and ended alike
// whatever the kind.

// extendKeys renews the lease that holds keys (all under one lease) if
// owned holds, as Backend.Extend does for the plain lock: a renewal,
// and when ttl needs more seconds than the lease was granted, a move of
// every key to a new lease with the longer TTL. A move that meets a
// concurrent change of one of the keys (the same owner's re-entry) looks
// again.
func (b *Backend) extendKeys(ctx context.Context, owned clientv3.Cmp, keys []string, ttl time.Duration) (bool, error) {
	for range 8 {
		gets := make([]clientv3.Op, len(keys))
		for i, k := range keys {
			gets[i] = clientv3.OpGet(k)
		}
		resp, err := b.cli.Txn(ctx).If(owned).Then(gets...).Commit()
		if err != nil {
			return false, err
		}
		if !resp.Succeeded {
			return false, nil
		}
		first := resp.Responses[0].GetResponseRange().GetKvs()
		if len(first) == 0 {
			return false, nil
		}
		id := clientv3.LeaseID(first[0].Lease)
		if id == clientv3.NoLease {
			return true, nil
		}
		granted, err := b.ka.renew(ctx, id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		want := leaseSeconds(ttl)
		if granted >= want {
			return true, nil
		}
		lease, err := b.cli.Grant(ctx, want)
		if err != nil {
			return false, err
		}
		cmps := []clientv3.Cmp{owned, clientv3.Compare(clientv3.LeaseValue(keys[0]), "=", id)}
		puts := make([]clientv3.Op, 0, len(keys))
		for i, k := range keys {
			rkvs := resp.Responses[i].GetResponseRange().GetKvs()
			if len(rkvs) == 0 {
				b.revoke(ctx, lease.ID)
				return false, nil
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rkvs[0].ModRevision))
			puts = append(puts, clientv3.OpPut(k, string(rkvs[0].Value), clientv3.WithLease(lease.ID)))
		}
		moved, err := b.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil {
			b.revoke(ctx, lease.ID)
			return false, err
		}
		if moved.Succeeded {
			b.revoke(ctx, id)
			return true, nil
		}
		b.revoke(ctx, lease.ID)
	}
	return false, fmt.Errorf("etcd: renew %s: the keys kept changing", keys[0])
}

// releaseKeys deletes keys in one transaction if every comparison of
// owned holds, then revokes the lease the first was under (best effort:
// it holds nothing now). It returns whether it deleted the first key.
func (b *Backend) releaseKeys(ctx context.Context, keys []string, owned ...clientv3.Cmp) (bool, error) {
	dels := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		dels[i] = clientv3.OpDelete(k, clientv3.WithPrevKV())
	}
	resp, err := b.cli.Txn(ctx).If(owned...).Then(dels...).Commit()
	if err != nil || !resp.Succeeded {
		return false, err
	}
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return false, nil
	}
	if id := clientv3.LeaseID(prev[0].Lease); id != clientv3.NoLease {
		b.revoke(ctx, id)
	}
	return true, nil
}

// releaseLease ends the hold that key is, if owned holds, as
// Backend.Release ends the plain lock: it reads the key's lease and
// revokes it, which deletes the key; one write to etcd's log. Each such
// lease belongs to one grant of one hold, so revoking it can never end a
// hold taken meanwhile.
func (b *Backend) releaseLease(ctx context.Context, key string, owned clientv3.Cmp) (bool, error) {
	resp, err := b.cli.Txn(ctx).If(owned).Then(clientv3.OpGet(key)).Commit()
	if err != nil || !resp.Succeeded {
		return false, err
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return false, nil
	}
	id := clientv3.LeaseID(kvs[0].Lease)
	if id == clientv3.NoLease {
		// Written without a lease by someone else: delete it if it is
		// still the same write.
		return b.releaseKeys(ctx, []string{key}, clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision))
	}
	if _, err := b.cli.Revoke(ctx, id); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil // expired between the read and the revoke
		}
		return false, err
	}
	return true, nil
}
