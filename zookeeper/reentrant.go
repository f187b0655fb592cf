package zookeeper

import (
	"context"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Reentrant is the view of a Backend that turnstile.Reentrant returns:
// locks the same owner may take again while it holds them, without
// waiting for itself (Curator's
// InterProcessMutex, with the count kept in ZooKeeper rather than in one
// process). Each acquisition counts: the owner must release as many
// times as it acquired, and only the last release frees the lock. Owner
// identity is explicit — give the Client turnstile.WithOwner(id) for the
// calls that may nest; without it every lease has a fresh owner and
// nothing nests.
//
// The lock on key K is a queue of ephemeral sequential nodes in the
// directory Dir(K)+".reentrant", like the plain lock's queue but apart
// from it: a reentrant and a plain lock on one name do not exclude each
// other. The first node holds the lock; its data is the holder's count
// of acquisitions, changed by versioned writes. The fencing token is the
// zxid that created the holder's node, and every re-entry returns it
// again; zxids grow with every write to the ensemble, so tokens increase
// from holder to holder. Nodes carry the Backend's ACL.
//
// The hold lives as long as its node and the session do, and its TTL is
// kept by this Backend's timer, which deletes the node: a re-entry and
// Extend make it live at least their TTL from now, never less than it
// had, so that no lease's renewal cuts another's short. A holder that
// crashed loses the whole hold when its session expires.
//
// Reentrant is a driver.Queuer: Client.Acquire waits in the queue,
// watching only the node ahead of it.
type Reentrant struct{ seqKind }

var (
	_ driver.Backend = (*Reentrant)(nil)
	_ driver.Queuer  = (*Reentrant)(nil)
	_ driver.Namer   = (*Reentrant)(nil)
)

// Name implements driver.Namer.
func (r *Reentrant) Name() string { return r.b.Name() + " reentrant" }

// Acquire implements driver.Backend. If owner holds key already, it
// counts one more acquisition, extends the TTL and returns the token of
// the first; otherwise it takes the lock if it is free, without queueing.
func (r *Reentrant) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return r.seqKind.Acquire(ctx, key, owner, ttl)
}

// AcquireWait implements driver.Queuer.
func (r *Reentrant) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	return r.seqKind.AcquireWait(ctx, key, owner, ttl)
}

// Extend implements driver.Backend: it renews the whole hold.
func (r *Reentrant) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return r.seqKind.Extend(ctx, key, owner, ttl)
}

// Release implements driver.Backend: it takes back one acquisition of
// owner, and frees key with the last. It returns ok=false if owner does
// not hold key.
func (r *Reentrant) Release(ctx context.Context, key, owner string) (bool, error) {
	return r.seqKind.Release(ctx, key, owner)
}
