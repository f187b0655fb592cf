package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

// listBatch is how many queue counts List asks for in one transaction,
// below etcd's default limit of 128 operations per transaction.
const listBatch = 100

// listLeases is how many lease TTL requests List has in flight at once.
const listLeases = 16

// Inspect implements driver.Inspector: one read-only transaction reads
// the lock key and counts key's queue, then LeaseTimeToLive reads the
// holder's lease. The holder's token is the lock key's mod revision — its
// token, unless the holder later moved the key to a longer lease (an
// Extend beyond the lease's TTL), which rewrites the key; a free key
// reports token 0, since etcd keeps no trace of a deleted key's
// revisions once compacted.
func (b *Backend) Inspect(ctx context.Context, key string) (_ driver.LockState, err error) {
	defer func() { err = permission(err, "read the lock "+b.LockKey(key)) }()
	lk := b.LockKey(key)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(lk),
		clientv3.OpGet(b.queuePrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return driver.LockState{}, fmt.Errorf("etcd: inspect %q: %w", key, err)
	}
	st := driver.LockState{Key: key, Waiters: int(resp.Responses[1].GetResponseRange().GetCount())}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return st, nil
	}
	h, err := b.holder(ctx, kvs[0])
	if err != nil {
		return driver.LockState{}, fmt.Errorf("etcd: inspect %q: %w", key, err)
	}
	st.Held, st.Holders, st.Token = true, []driver.Holder{h}, h.Token
	return st, nil
}

// holder describes the owner of a lock key, with the time its lease has
// left: -1 for a key written without a lease (it never expires), 0 for a
// lease that has just run out (etcd is deleting the key).
func (b *Backend) holder(ctx context.Context, kv *mvccpb.KeyValue) (driver.Holder, error) {
	h := driver.Holder{Owner: string(kv.Value), Token: uint64(kv.ModRevision), TTL: -1}
	if kv.Lease == 0 {
		return h, nil
	}
	ttl, err := b.leaseLeft(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return driver.Holder{}, err
	}
	h.TTL = ttl
	return h, nil
}

// leaseLeft is the time lease id has left; 0 once it has expired.
func (b *Backend) leaseLeft(ctx context.Context, id clientv3.LeaseID) (time.Duration, error) {
	r, err := b.cli.TimeToLive(ctx, id)
	if err != nil {
		return 0, err
	}
	return max(time.Duration(r.TTL)*time.Second, 0), nil
}

// List implements driver.Inspector with one range read of
// <prefix>locks/<prefix> limited to limit keys, in key order, then the
// TTL of each listed lock's lease (listLeases requests at a time) and the
// length of each listed key's queue (listBatch keys per transaction). It
// reads only keys under prefix and at most limit of them: its cost grows
// with limit, not with the number of locks in the store.
func (b *Backend) List(ctx context.Context, prefix string, limit int) (_ []driver.LockState, _ bool, err error) {
	defer func() { err = permission(err, "list the locks under "+b.LockKey(prefix)) }()
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: etcd: list limit %d must be positive", turnstile.ErrInvalidOption, limit)
	}
	base := b.LockKey("")
	resp, err := b.cli.Get(ctx, base+prefix, clientv3.WithPrefix(), clientv3.WithLimit(int64(limit)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, false, fmt.Errorf("etcd: list %q: %w", prefix, err)
	}
	kvs := resp.Kvs
	if len(kvs) > limit {
		kvs = kvs[:limit]
	}
	states := make([]driver.LockState, len(kvs))
	for i, kv := range kvs {
		key := strings.TrimPrefix(string(kv.Key), base)
		states[i] = driver.LockState{Key: key, Held: true, Token: uint64(kv.ModRevision), Waiters: 0}
	}

	// Leases: several requests in flight, each a small read.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, listLeases)
	)
	for i, kv := range kvs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			h, err := b.holder(ctx, kv)
			if err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
				return
			}
			states[i].Holders = []driver.Holder{h}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, false, fmt.Errorf("etcd: list %q: %w", prefix, first)
	}

	// Queues: count-only reads, many in one transaction.
	for lo := 0; lo < len(states); lo += listBatch {
		hi := min(lo+listBatch, len(states))
		ops := make([]clientv3.Op, 0, hi-lo)
		for _, st := range states[lo:hi] {
			ops = append(ops, clientv3.OpGet(b.queuePrefix(st.Key), clientv3.WithPrefix(), clientv3.WithCountOnly()))
		}
		r, err := b.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, false, fmt.Errorf("etcd: list %q: count waiters: %w", prefix, err)
		}
		for i, op := range r.Responses {
			states[lo+i].Waiters = int(op.GetResponseRange().GetCount())
		}
	}
	return states, resp.More || len(resp.Kvs) > limit, nil
}

// ForceRelease implements driver.ForceReleaser. One transaction deletes
// the lock key, returning what it held, and counts key's queue; then the
// holder's lease is read for the time it had left. Deleting the key is
// what a release does, so waiters watching it are woken alike, and the
// holder's next Extend finds the key gone and reports the lock lost. The
// lease is left alone: the holder's other locks may share it.
//
// The token floor needs no extra write: tokens are etcd revisions, which
// grow with every write to the cluster. The returned Token is the
// revision of the transaction, at least the removed holder's token and
// less than every token issued after it.
func (b *Backend) ForceRelease(ctx context.Context, key string) (_ driver.LockState, err error) {
	defer func() { err = permission(err, "remove the lock "+b.LockKey(key)) }()
	lk := b.LockKey(key)
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpDelete(lk, clientv3.WithPrevKV()),
		clientv3.OpGet(b.queuePrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return driver.LockState{}, fmt.Errorf("etcd: force release %q: %w", key, err)
	}
	st := driver.LockState{
		Key:     key,
		Token:   uint64(resp.Header.Revision),
		Waiters: int(resp.Responses[1].GetResponseRange().GetCount()),
	}
	b.untrack(lk, "")
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return st, nil
	}
	kv := prev[0]
	h := driver.Holder{Owner: string(kv.Value), Token: uint64(kv.ModRevision), TTL: -1}
	if kv.Lease != 0 {
		// The lock is gone already; what is left is how long its lease
		// had. The lease stays: the holder's other locks may share it.
		if ttl, err := b.leaseLeft(ctx, clientv3.LeaseID(kv.Lease)); err == nil {
			h.TTL = ttl
		} else {
			h.TTL = 0
		}
	}
	st.Held, st.Holders = true, []driver.Holder{h}
	return st, nil
}
