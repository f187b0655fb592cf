package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RevokeLease revokes id as a failed acquisition does.
func (b *Backend) RevokeLease(ctx context.Context, id clientv3.LeaseID) { b.revoke(ctx, id) }

// BeforeWatch makes every waiter of b run f before it opens a watch: the
// moment between a waiter's look at the store and its watch.
func (b *Backend) BeforeWatch(f func()) { b.beforeWatch = f }

// RenewLease renews id as Extend and the waiters do, and returns its TTL
// in seconds.
func (b *Backend) RenewLease(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	return b.ka.renew(ctx, id)
}

// LocalWaiters is how many of b's own waiters are in key's line: those a
// release can hand the lock to.
func (b *Backend) LocalWaiters(key string) int {
	b.waiting.mu.Lock()
	defer b.waiting.mu.Unlock()
	return len(b.waiting.byKey[key])
}

// Tracked is how many keys b's sweeper tracks.
func (b *Backend) Tracked() int { return b.tracked() }

// Orphan hands key, written for owner under lease by an attempt whose
// outcome is unknown, to b's sweeper, as a failed clean-up does.
func (b *Backend) Orphan(key, owner string, lease clientv3.LeaseID) { b.orphan(key, owner, lease) }

// AgeLeases makes b's shared leases look granted or renewed d earlier
// than they were, as if no acquisition had renewed them for d.
func (b *Backend) AgeLeases(d time.Duration) {
	b.leases.mu.Lock()
	defer b.leases.mu.Unlock()
	for _, l := range b.leases.byClass {
		l.mu.Lock()
		l.until = l.until.Add(-d)
		l.mu.Unlock()
	}
}

// InFlightTxns is how many transactions of a line may be on their way.
const InFlightTxns = inFlightTxns

// Queued is how many writes wait in b's line for a transaction.
func (b *Backend) Queued() int {
	b.batch.mu.Lock()
	defer b.batch.mu.Unlock()
	return len(b.batch.line)
}

// Txn commits owner's write on lock key lk as the plain locks' writes
// are: alone, or in one transaction with other callers' writes.
func (b *Backend) Txn(ctx context.Context, lk, owner string, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	return b.txn(ctx, lk, owner, cmps, then, els)
}

// SetLineTimeout bounds the transactions of every backend's line by d
// until the test ends.
func SetLineTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	old := lineTimeout
	lineTimeout = d
	t.Cleanup(func() { lineTimeout = old })
}
