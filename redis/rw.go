package redis

import (
	"context"
	_ "embed" // the Lua scripts
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

var (
	//go:embed read_acquire.lua
	readAcquireLua string
	//go:embed write_acquire.lua
	writeAcquireLua string
	//go:embed member_extend.lua
	memberExtendLua string
	//go:embed member_release.lua
	memberReleaseLua string

	readAcquire   = newKindScript(tokenLua + readAcquireLua)
	writeAcquire  = newKindScript(tokenLua + writeAcquireLua)
	memberExtend  = newRenewScript(memberExtendLua)
	memberRelease = newKindScript(memberReleaseLua)
)

// rwLock is a read-write lock of a Backend, shared by its two sides;
// ReadLock says how it works.
type rwLock struct {
	b     *Backend
	claim time.Duration
}

// rwKeys are the Redis keys of one read-write lock.
type rwKeys struct {
	readers, writer, claims string
	names
}

func (rw *rwLock) keys(key string) rwKeys {
	n := rw.b.names(key)
	return rwKeys{readers: n.kindKey(rediskeys.Readers), writer: n.kindKey(rediskeys.Writer), claims: n.kindKey(rediskeys.Writers), names: n}
}

// ReadLock is the read side of a Backend's read-write lock, whose two
// sides turnstile.ReadWrite returns (ReadLock and WriteLock), each a
// driver.Backend for a Client of its own: any number of readers hold a
// key together, or one writer holds it alone.
//
// Policy: writer preference. A writer that finds the lock held registers
// a claim, and while any claim is live no new reader gets in; readers
// already inside finish (or expire), then the writer enters. So a steady
// stream of readers cannot starve writers. A claim expires when its
// writer has not attempted again for the claim time
// (turnstile.WithWriterClaim, default 2 s), so a writer that gave up or
// crashed blocks new readers for at most that long. Every release wakes
// waiters at once. A writer's refused TryAcquire leaves a claim too,
// which keeps new readers out for the claim time. Among themselves
// writers are not ordered, and a reader cannot upgrade to a writer (it
// would wait for itself).
//
// Keys for lock key K: P{K}:readers, a sorted set of reader owners scored
// by the expiry of each one's lease (so readers expire independently;
// expired ones are pruned with one ZREMRANGEBYSCORE, never a loop);
// P{K}:writer, the writer's owner id with the lease TTL; P{K}:writers,
// the claims of waiting writers, scored by expiry. Tokens come from K's
// fence key, as the plain lock's do, for readers and writers alike. The
// writer's release and the last reader's release publish on
// P{K}:released.
//
// The read side is driver.Shared: a Client's waiting readers contend on
// their own rather than in its local line, so they enter together.
type ReadLock struct{ rw *rwLock }

var (
	_ driver.Backend       = (*ReadLock)(nil)
	_ driver.BatchExtender = (*ReadLock)(nil)
	_ driver.Notifier      = (*ReadLock)(nil)
	_ driver.Namer         = (*ReadLock)(nil)
)

// Name implements driver.Namer.
func (r *ReadLock) Name() string { return r.rw.b.Name() + " read lock" }

// Shared implements driver.Shared: many readers hold the lock at once, so
// a Client lets its waiting readers contend on their own.
func (r *ReadLock) Shared() bool { return true }

// Released implements driver.Notifier: a writer's release (and the last
// reader's) is published where the plain lock's releases are.
func (r *ReadLock) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return r.rw.b.Released(ctx, key)
}

// Acquire implements driver.Backend: it succeeds unless a writer holds
// key or waits for it.
func (r *ReadLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return 0, false, err
	}
	k := r.rw.keys(key)
	lockTTL, fenceTTL := r.rw.b.ttlArgs(ttl)
	c := call{
		keys: []string{k.readers, k.writer, k.claims, k.fence},
		args: []string{owner, lockTTL, fenceTTL},
	}
	return leaseOf(r.rw.b.runGrant(ctx, readAcquire, c, func(ctx context.Context) { _, _ = r.Release(ctx, key, owner) }))
}

func (r *ReadLock) extendCall(key, owner string, ttl time.Duration) call {
	k := r.rw.keys(key)
	lockTTL, fenceTTL := r.rw.b.ttlArgs(ttl)
	return call{keys: []string{k.readers, k.fence}, args: []string{owner, lockTTL, fenceTTL}}
}

// Extend implements driver.Backend: it renews owner's read lease only.
func (r *ReadLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return false, err
	}
	n, err := r.rw.b.run(ctx, memberExtend, r.extendCall(key, owner, ttl))
	return n == 1, err
}

// ExtendMany implements driver.BatchExtender in one pipelined round trip.
func (r *ReadLock) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, func(q driver.ExtendRequest) call { return r.extendCall(q.Key, q.Owner, q.TTL) }, r.rw.b.multi(memberExtend))
}

// Release implements driver.Backend: it ends owner's read lease; the last
// reader to leave tells waiting writers.
func (r *ReadLock) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return false, err
	}
	k := r.rw.keys(key)
	n, err := r.rw.b.run(ctx, memberRelease, call{
		keys: []string{k.readers, k.fence},
		args: []string{owner, r.rw.b.cfg.graceArg, k.channel, "0"},
	})
	return n == 1, err
}

// WriteLock is the write side of the read-write lock ReadLock describes:
// leases that hold the key alone.
type WriteLock struct{ rw *rwLock }

var (
	_ driver.Backend       = (*WriteLock)(nil)
	_ driver.BatchExtender = (*WriteLock)(nil)
	_ driver.Notifier      = (*WriteLock)(nil)
	_ driver.Namer         = (*WriteLock)(nil)
)

// Name implements driver.Namer.
func (w *WriteLock) Name() string { return w.rw.b.Name() + " write lock" }

// Released implements driver.Notifier: the writer's release and the
// last reader's are published where the plain lock's releases are.
func (w *WriteLock) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return w.rw.b.Released(ctx, key)
}

// Acquire implements driver.Backend: it succeeds when no other writer
// and no reader holds key; otherwise it registers owner's claim, which
// keeps new readers out.
func (w *WriteLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return 0, false, err
	}
	k := w.rw.keys(key)
	lockTTL, fenceTTL := w.rw.b.ttlArgs(ttl)
	c := call{
		keys: []string{k.writer, k.readers, k.claims, k.fence},
		args: []string{owner, lockTTL, fenceTTL, millis(w.rw.claim)},
	}
	return leaseOf(w.rw.b.runGrant(ctx, writeAcquire, c, func(ctx context.Context) { _, _ = w.Release(ctx, key, owner) }))
}

// The writer's lock is a plain lock on its own Redis key: the plain
// extend and release scripts serve it.
func (w *WriteLock) extendCall(key, owner string, ttl time.Duration) call {
	k := w.rw.keys(key)
	lockTTL, fenceTTL := w.rw.b.ttlArgs(ttl)
	return call{keys: []string{k.writer, k.fence}, args: []string{owner, lockTTL, fenceTTL}}
}

// Extend implements driver.Backend.
func (w *WriteLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return false, err
	}
	n, err := w.rw.b.conn.eval(ctx, extendScript, w.extendCall(key, owner, ttl))
	return n == 1, err
}

// ExtendMany implements driver.BatchExtender in one pipelined round trip.
func (w *WriteLock) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, func(q driver.ExtendRequest) call { return w.extendCall(q.Key, q.Owner, q.TTL) },
		func(ctx context.Context, cs []call) []reply { return w.rw.b.conn.evalMulti(ctx, extendScript, cs) })
}

// Release implements driver.Backend.
func (w *WriteLock) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return false, err
	}
	k := w.rw.keys(key)
	n, err := w.rw.b.conn.eval(ctx, releaseScript, call{
		keys: []string{k.writer, k.fence},
		args: []string{owner, k.channel, "always", w.rw.b.cfg.graceArg}, // readers waiting do not mark the lock
	})
	return n >= 1, err
}
