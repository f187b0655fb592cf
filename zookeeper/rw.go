package zookeeper

import (
	"context"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Node name tags of the read-write lock's two sides.
const (
	readTag  = "read."
	writeTag = "write."
)

// ReadLock is the read side of a Backend's read-write lock (Curator's
// InterProcessReadWriteLock), whose two sides turnstile.ReadWrite returns
// (ReadLock and WriteLock), each a driver.Backend for a Client of its
// own: any number of readers hold a key together, or one writer holds it
// alone. Its writers queue in order, so turnstile.WithWriterClaim has no
// effect here.
//
// The lock on key K is one queue of ephemeral sequential nodes in the
// directory Dir(K)+".rw", named read.<owner>-<sequence> and
// write.<owner>-<sequence>, with the Backend's ACL. A writer holds the
// lock when its node is first; a reader holds it when no writer's node
// is ahead of its own. So the lock is served in arrival order: a waiting
// writer's node keeps every reader that comes after it out until the
// writer has had its turn, and a stream of readers cannot starve it.
// Each waiter watches only the one node it waits for — a writer the node
// just ahead, a reader the nearest writer's node ahead — so a release
// wakes only those it lets in. A reader cannot upgrade to a writer (it
// would wait for itself).
//
// The fencing token is the zxid that created the holder's node. Nodes are
// created in queue order and a node holds the lock only once every
// earlier node it excludes is gone, so tokens increase from each holder
// to the next, readers and writers alike. Holds expire like plain locks:
// after the TTL without an Extend this Backend deletes the node, and
// when a session ends ZooKeeper does.
//
// Both sides are driver.Queuers: Client.Acquire waits in the queue. The
// read side is also driver.Shared.
type ReadLock struct{ seqKind }

// WriteLock is the write side of the read-write lock ReadLock describes.
type WriteLock struct{ seqKind }

// afterWriters: a reader's node waits for the nearest writer's node ahead
// of it, and holds the lock when there is none.
func afterWriters(q []node, at int) int {
	for j := at - 1; j >= 0; j-- {
		if strings.HasPrefix(q[j].owner, writeTag) {
			return j
		}
	}
	return -1
}

var (
	_ driver.Backend = (*ReadLock)(nil)
	_ driver.Queuer  = (*ReadLock)(nil)
	_ driver.Shared  = (*ReadLock)(nil)
	_ driver.Namer   = (*ReadLock)(nil)
	_ driver.Backend = (*WriteLock)(nil)
	_ driver.Queuer  = (*WriteLock)(nil)
	_ driver.Namer   = (*WriteLock)(nil)
)

// Name implements driver.Namer.
func (r *ReadLock) Name() string { return r.b.Name() + " read" }

// Shared implements driver.Shared: readers hold a key together.
func (r *ReadLock) Shared() bool { return true }

// Acquire implements driver.Backend: it takes the read lock if no writer
// holds key or waits for it, without queueing.
func (r *ReadLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return r.seqKind.Acquire(ctx, key, owner, ttl)
}

// AcquireWait implements driver.Queuer.
func (r *ReadLock) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	return r.seqKind.AcquireWait(ctx, key, owner, ttl)
}

// Extend implements driver.Backend.
func (r *ReadLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return r.seqKind.Extend(ctx, key, owner, ttl)
}

// Release implements driver.Backend.
func (r *ReadLock) Release(ctx context.Context, key, owner string) (bool, error) {
	return r.seqKind.Release(ctx, key, owner)
}

// Name implements driver.Namer.
func (w *WriteLock) Name() string { return w.b.Name() + " write" }

// Acquire implements driver.Backend: it takes the write lock if nobody
// holds key or waits for it, without queueing.
func (w *WriteLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return w.seqKind.Acquire(ctx, key, owner, ttl)
}

// AcquireWait implements driver.Queuer.
func (w *WriteLock) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	return w.seqKind.AcquireWait(ctx, key, owner, ttl)
}

// Extend implements driver.Backend.
func (w *WriteLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return w.seqKind.Extend(ctx, key, owner, ttl)
}

// Release implements driver.Backend.
func (w *WriteLock) Release(ctx context.Context, key, owner string) (bool, error) {
	return w.seqKind.Release(ctx, key, owner)
}
