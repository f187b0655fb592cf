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
//   - Batcher: many acquisitions and releases in one round trip (a
//     service instance's batches).
//   - Notifier: release notices, so waiters need not poll.
//   - Queuer: a first-come-first-served queue of waiters kept by the store.
//   - TimedQueuer, TimedAcquirer: grants that say from when the store
//     holds them.
//   - TokenRoom: tokens that leave room for handoffs within a Client.
//   - NoticeReleaser: a release that says when to send the release notice,
//     and whether someone else was waiting to be told.
//   - Fencer: raising a key's fencing token (Redlock's node recovery).
//   - Shared: locks several owners may hold (semaphores, read locks).
//   - Inspector: who holds a key, and which keys are held (operators).
//   - ForceReleaser: an operator's removal of a stuck lock.
//   - TTLHolder: a lock lasts its TTL and no other bound (lock delay).
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

// Batcher is implemented by backends that can make many acquisitions and
// releases in one round trip (for example by pipelining). A service
// instance makes the ops of a client's batch through it.
type Batcher interface {
	// DoMany makes every op and returns one result per op, in the same
	// order: each the result its own call would have had (AcquireSince
	// for OpAcquire, ReleaseNotice for OpRelease). The ops are made as
	// concurrent calls would be, in no set order: a batch must not hold
	// two ops on one key whose outcome depends on their order.
	DoMany(ctx context.Context, ops []Op) []OpResult
}

// OpKind is what an Op does.
type OpKind uint8

const (
	// OpAcquire takes Key for Owner with TTL, as Acquire does.
	OpAcquire OpKind = iota + 1
	// OpRelease releases Key for Owner, as ReleaseNotice does with Notice.
	OpRelease
)

// Op is one operation of a Batcher's DoMany.
type Op struct {
	Kind       OpKind
	Key, Owner string
	TTL        time.Duration // OpAcquire
	Notice     Notice        // OpRelease
}

// OpResult is an Op's outcome.
type OpResult struct {
	Token uint64 // OpAcquire: the grant's fencing token
	// OK: OpAcquire, the lock was taken; OpRelease, the owner held it.
	OK bool
	// Tried: OpRelease, someone else had tried to take the lock (as
	// ReleaseNotice reports).
	Tried bool
	// Since: OpAcquire, from when the store holds the grant, as
	// TimedAcquirer's; zero when the store does not say.
	Since time.Time
	Err   error
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

// TimedQueuer is a Queuer whose grants say from when the store holds the
// lock: the Client then need not renew a lock the queue granted before
// handing it out, which costs the store a round trip per acquisition.
type TimedQueuer interface {
	Queuer
	// AcquireWaitSince is AcquireWait that also returns since, a time on
	// this machine's clock (with its monotonic reading) such that the
	// store holds the lock until since + ttl at least, unless it is
	// released or taken away meanwhile. since is not later than the
	// call's return. A zero since says nothing: the Client then renews
	// the lock as it does a Queuer's grant.
	AcquireWaitSince(ctx context.Context, key, owner string, ttl time.Duration) (token uint64, since time.Time, err error)
}

// TimedAcquirer is a Backend whose grants say from when the store holds
// the lock, as a TimedQueuer's do: its Acquire need not then renew
// whatever else holds the lock (a lease that other locks share) with
// every grant, since the holder's deadline may count from an earlier
// renewal.
type TimedAcquirer interface {
	// AcquireSince is Acquire that also returns since when ok, a time on
	// this machine's clock (with its monotonic reading) such that the
	// store holds the lock until since + ttl at least, unless it is
	// released or taken away meanwhile. since may be earlier than the
	// call's start, and is not later than its return. A zero since says
	// nothing: the lock is then held for ttl from the call's start, as
	// Acquire's is.
	AcquireSince(ctx context.Context, key, owner string, ttl time.Duration) (token uint64, ok bool, since time.Time, err error)
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

// Notice says when a release sends the store's release notice.
type Notice uint8

const (
	// NoticeIfTried: only if someone else tried to take the lock while
	// it was held — what Release does on a NoticeReleaser.
	NoticeIfTried Notice = iota
	// NoticeAlways: in any case. An election's resignation sends it so:
	// its observers wait for the notice without trying the lock.
	NoticeAlways
)

// NoticeReleaser is implemented by backends whose Release sends the
// release notice only when someone else tried to take the lock while it
// was held (Redis, and a Redlock or fallback pair over it): a waiter that
// tries nothing would not hear of the release. The Client resigns an
// election with NoticeAlways; and when another owner tried the lock, the
// next waiter of the releasing Client takes its turn in the race for it
// like the other processes' waiters, after a random pause, instead of
// asking at once.
type NoticeReleaser interface {
	// ReleaseNotice is Release that sends the release notice as n says,
	// and reports whether someone else had tried to take the lock while
	// it was held (and so was told).
	ReleaseNotice(ctx context.Context, key, owner string, n Notice) (ok, tried bool, err error)
}

// ReleaseNotice releases key for owner on b as n says: b's ReleaseNotice
// where it is a NoticeReleaser; otherwise its Release, which tells the
// waiters every time (tried is then true). Composite backends (Redlock,
// a fallback pair) release their members with it.
func ReleaseNotice(ctx context.Context, b Backend, key, owner string, n Notice) (ok, tried bool, err error) {
	if nr, can := b.(NoticeReleaser); can {
		return nr.ReleaseNotice(ctx, key, owner, n)
	}
	ok, err = b.Release(ctx, key, owner)
	return ok, true, err
}

// AcquireSince takes key for owner on b, with since from when the store
// holds the lock: b's AcquireSince where it is a TimedAcquirer; otherwise
// its Acquire, with a zero since (held for ttl from the call's start).
func AcquireSince(ctx context.Context, b Backend, key, owner string, ttl time.Duration) (token uint64, ok bool, since time.Time, err error) {
	if ta, can := b.(TimedAcquirer); can {
		return ta.AcquireSince(ctx, key, owner, ttl)
	}
	token, ok, err = b.Acquire(ctx, key, owner, ttl)
	return token, ok, time.Time{}, err
}

// AcquireWaitSince waits in q for key, with since from when the store
// holds the lock: q's AcquireWaitSince where it is a TimedQueuer;
// otherwise its AcquireWait, with a zero since (the lock must then be
// renewed to learn it).
func AcquireWaitSince(ctx context.Context, q Queuer, key, owner string, ttl time.Duration) (token uint64, since time.Time, err error) {
	if tq, can := q.(TimedQueuer); can {
		return tq.AcquireWaitSince(ctx, key, owner, ttl)
	}
	token, err = q.AcquireWait(ctx, key, owner, ttl)
	return token, time.Time{}, err
}

// TokenRoom is implemented by backends whose fencing tokens leave room
// between grants. Every token such a backend issues for a key is a
// multiple of TokenRoom(), and every token it issues for the key later —
// after any grant, or after a Fencer's RaiseFence to a token t — is
// greater than t − t mod TokenRoom() + TokenRoom() − 1. The Client then
// hands a lock it holds to its own next waiter without a round trip: the
// lock stays held in the store under the same owner id, and the new lease
// gets the previous lease's token plus one, while that stays below the
// next multiple. A ForceRelease of such a backend returns a floor of at
// least t − t mod TokenRoom() + TokenRoom() − 1 for a removed holder
// whose grant had token t, so that it covers every lease of a run of
// handoffs. TokenRoom() is the same for every key; below 2 it means no
// room (a composite backend whose members do not all leave it).
type TokenRoom interface {
	TokenRoom() uint64
}

// OpenConfig is what turnstile.Open tells a backend it opens from a URL
// about the Client that will use it: the settings a store must agree
// with.
type OpenConfig struct {
	// TTL is the Client's lease TTL: turnstile.WithTTL's, else
	// turnstile.DefaultTTL. A store where something other than the lease
	// bounds how long a crashed holder's lock lasts (ZooKeeper's session)
	// derives that bound from it, so that --ttl means the same on every
	// store.
	TTL time.Duration
	// LockDelay is the Client's lock delay (turnstile.WithLockDelay),
	// zero when it has none: the store is then asked for locks of TTL +
	// LockDelay, and a store that bounds TTLs (a fallback pair's switch
	// grace) must allow that much.
	LockDelay time.Duration
}

// TTLHolder is implemented by backends that keep a lock whose holder
// stopped renewing it (and did not release it) for at least the TTL of
// its last Acquire or Extend, counted from when the store took that
// request, whatever else happens to the holder: a lock that a session
// ends (ZooKeeper's ephemeral nodes) would not outlast its holder. The Client then keeps a failed holder's lock for a lock
// delay past its lease (turnstile.WithLockDelay) by asking the store for
// TTL + delay while its leases count TTL alone. HoldsTTL reports whether
// the backend does: a view whose holds live otherwise, or a composite
// backend one of whose members cannot, reports false.
type TTLHolder interface {
	HoldsTTL() bool
}

// HoldsTTL reports whether b is a TTLHolder that holds.
func HoldsTTL(b Backend) bool {
	h, ok := b.(TTLHolder)
	return ok && h.HoldsTTL()
}

// LockState is what a store knows about one key's lock.
type LockState struct {
	// Key is the lock's key, as the Client names it.
	Key string
	// Held reports whether anyone holds the lock now.
	Held bool
	// Holders are the owners holding it: one for an exclusive lock,
	// several for a shared lock (semaphore permits, read locks). Empty
	// when the lock is free.
	Holders []Holder
	// Token is the highest fencing token the store has issued for key,
	// zero if it has issued none (or cannot tell).
	Token uint64
	// Waiters is the number of owners queued for key in the store, or -1
	// when the store does not keep a queue it can count.
	Waiters int
}

// Holder is one owner of a lock.
type Holder struct {
	// Owner is the owner id the holder acquired with.
	Owner string
	// Token is the fencing token of this holder's grant in the store, zero
	// if the store cannot tell. A lease a Client handed over without the
	// store (TokenRoom) has a token up to TokenRoom() − 1 above it.
	Token uint64
	// TTL is the time left before the lease expires unless renewed, or -1
	// when it is bounded by a session rather than a deadline the store
	// reports (ZooKeeper's ephemeral nodes).
	TTL time.Duration
}

// Inspector is implemented by backends that can say who holds a key and
// list the keys held now, for operators (turnstile status and ls) and
// Client.Inspect. Neither method changes anything in the store.
type Inspector interface {
	// Inspect returns key's state. A key nobody holds is not an error: it
	// returns Held=false.
	Inspect(ctx context.Context, key string) (LockState, error)
	// List returns the states of held locks whose keys start with prefix,
	// at most limit of them (limit > 0), in no particular order, and
	// whether more remain. Its cost grows with the number of keys the
	// store holds under prefix, not with the whole store, where the store
	// allows (each backend documents how it scans).
	List(ctx context.Context, prefix string, limit int) (states []LockState, more bool, err error)
}

// ForceReleaser is implemented by backends that let an operator remove a
// lock whoever holds it: a holder that is stuck or gone while its lease
// keeps being renewed, or a lease that must end before its TTL.
type ForceReleaser interface {
	// ForceRelease removes key's lock, whoever holds it, and returns the
	// state it removed (Held=false if nobody held it). First, in the same
	// atomic step where the store allows, it makes every token issued
	// later for key greater than every token issued so far, so that
	// fenced storage refuses the removed holder's late writes once the
	// next holder has written. Waiters are told as on a release. The
	// returned Token is that floor: at least every removed holder's
	// token, and less than every token issued later for key.
	ForceRelease(ctx context.Context, key string) (LockState, error)
}
