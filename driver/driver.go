// Package driver defines the small interface a lock store implements so that
// turnstile's Client can use it, in the way database/sql/driver serves
// database/sql.
//
// A Backend only talks to its store. Everything that is the same for every
// store — retrying, waiting, the watchdog that renews held leases, owner ids,
// validation of keys and TTLs — lives once in package turnstile. Callers of a
// Backend are expected to have validated their arguments: keys are non-empty
// and at most turnstile.MaxKeyLen bytes, owners are opaque non-empty strings,
// TTLs are at least one millisecond.
//
// Optional capabilities are discovered with type assertions, like
// io.WriterTo:
//
//   - BatchExtender: many renewals in one round trip (the watchdog).
//   - Notifier: release notices, so waiters need not poll.
//   - Queuer: a first-come-first-served queue of waiters kept by the store.
//   - HandOff: a release that passes the lock to a waiting owner.
//   - QuietReleaser: a release without a notice, and the notice on its own.
//   - Fencer: raising a key's fencing token (Redlock's node recovery).
//   - Shared: locks several owners may hold (semaphores, read locks).
//   - Namer: a name for errors and metrics (see Name).
//   - io.Closer: closed by the Client that opened the backend.
package driver

import (
	"context"
	"time"
)

// Backend is a store that can hold exclusive, expiring locks.
//
// Every method is safe for concurrent use and performs at most one round trip
// to the store (composite backends may contact several stores in parallel).
type Backend interface {
	// Acquire takes key for owner for ttl if nobody holds it. On success it
	// returns ok=true and a fencing token strictly greater than every token
	// this store issued earlier for key. If another owner holds key it returns
	// ok=false and a nil error. An error means the outcome is unknown: the
	// lock may or may not have been taken.
	Acquire(ctx context.Context, key, owner string, ttl time.Duration) (token uint64, ok bool, err error)

	// Extend resets the expiry of key to ttl from now if, and only if, owner
	// still holds it. It returns ok=false and a nil error when owner does not
	// hold key (it expired, was released, or another owner took it).
	Extend(ctx context.Context, key, owner string, ttl time.Duration) (ok bool, err error)

	// Release frees key if, and only if, owner holds it. It returns ok=false
	// and a nil error when owner does not hold key. Release never removes a
	// lock held by another owner.
	Release(ctx context.Context, key, owner string) (ok bool, err error)
}

// ExtendRequest is one renewal in a batch.
type ExtendRequest struct {
	Key   string
	Owner string
	TTL   time.Duration
}

// ExtendResult is the outcome of one ExtendRequest, with the meaning of the
// return values of Backend.Extend.
type ExtendResult struct {
	OK  bool
	Err error
}

// BatchExtender is implemented by backends that can renew many leases in one
// round trip (for example by pipelining). The watchdog sends renewals that
// fall due together through it.
type BatchExtender interface {
	// ExtendMany performs every request and returns one result per request,
	// in the same order.
	ExtendMany(ctx context.Context, reqs []ExtendRequest) []ExtendResult
}

// Notifier is implemented by backends that can tell waiters when a key is
// released, so that they retry at once instead of polling.
type Notifier interface {
	// Released returns a channel that receives a value (or is closed) after
	// key has been released, and a function that stops the subscription.
	// Notices may be lost; callers keep a fallback timer.
	Released(ctx context.Context, key string) (<-chan struct{}, func(), error)
}

// Namer is implemented by backends that describe themselves in errors and
// logs, for example "redis 127.0.0.1:6379".
type Namer interface {
	Name() string
}

// Fencer is implemented by backends that can raise the fencing token of a
// held lock. Composite backends use it to make tokens agree across stores:
// Redlock writes the token it returns back to a quorum of its members, so
// that any later quorum meets at least one store that issues larger ones.
type Fencer interface {
	// RaiseFence makes every token issued later for key greater than
	// token, if and only if owner holds key. It returns ok=false and a nil
	// error when owner does not hold key; then nothing changes.
	RaiseFence(ctx context.Context, key, owner string, token uint64) (ok bool, err error)
}

// Queuer is implemented by backends that keep waiters in a queue of their
// own — ZooKeeper's sequential nodes, etcd's revisions — so that the lock
// passes to waiters in arrival order and each waiter watches only its
// predecessor instead of polling. Client.Acquire uses it instead of
// retrying with backoff; TryAcquire still uses Acquire, which never queues.
type Queuer interface {
	// AcquireWait waits in key's queue until owner holds key, and returns
	// its fencing token. When ctx is done it leaves the queue (and releases
	// key if it was granted meanwhile) and returns an error matching
	// ctx.Err(). As with Acquire, an error from the store means the outcome
	// is unknown.
	AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (token uint64, err error)
}

type positionKey struct{}

// WithPositionFunc returns a context that carries f to a Queuer's
// AcquireWait: the Queuer calls f with the waiter's place in the queue
// (1 = next to take the lock) when it learns it and whenever it changes.
// The Client sets it for callers that ask (turnstile.WithQueuePosition).
func WithPositionFunc(ctx context.Context, f func(position int)) context.Context {
	return context.WithValue(ctx, positionKey{}, f)
}

// PositionFunc returns the function WithPositionFunc put in ctx, or nil.
// Queuers call it from the goroutine running AcquireWait; it must not
// block.
func PositionFunc(ctx context.Context) func(position int) {
	f, _ := ctx.Value(positionKey{}).(func(int))
	return f
}

// Shared is implemented by backends whose locks several owners may hold
// at once: semaphores, read locks. The Client then lets its waiters
// contend on their own instead of lining them up behind one another,
// which would admit them one at a time.
type Shared interface {
	// Shared reports whether the lock may have several holders.
	Shared() bool
}

// QuietReleaser is implemented by backends that tell waiters of releases
// (Notifier) and can also release without telling them, and tell them on
// demand. When the next holder is a waiter of the same Client, which the
// Client wakes itself, the Client releases quietly, so that waiters in
// other processes are not woken for a lock they would not get; now and
// then it releases aloud and lets them race, so that they are not
// starved.
type QuietReleaser interface {
	// ReleaseQuiet is Release without the release notice.
	ReleaseQuiet(ctx context.Context, key, owner string) (ok bool, err error)
	// Notify sends key's release notice without releasing anything.
	Notify(ctx context.Context, key string) error
}

// HandOff is implemented by backends that can pass a lock from its owner
// straight to the next owner in one atomic step, without a release
// notice. When the next holder is a waiter of the same Client, the Client
// hands the lock over instead of releasing it and letting the waiter take
// it: one round trip instead of two.
type HandOff interface {
	// HandOff releases key held by owner and takes it for next for ttl,
	// returning next's fencing token. It returns ok=false and a nil error
	// when owner does not hold key; then nothing changes. As with
	// Acquire, an error means the outcome is unknown.
	HandOff(ctx context.Context, key, owner, next string, ttl time.Duration) (token uint64, ok bool, err error)
}
