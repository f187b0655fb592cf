package redis

import (
	"context"
	_ "embed" // the Lua scripts
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

var (
	//go:embed reentrant_acquire.lua
	reentrantAcquireLua string
	//go:embed reentrant_extend.lua
	reentrantExtendLua string
	//go:embed reentrant_release.lua
	reentrantReleaseLua string

	reentrantAcquire = newKindScript(tokenLua + reentrantAcquireLua)
	reentrantExtend  = newRenewScript(reentrantExtendLua)
	reentrantRelease = newKindScript(reentrantReleaseLua)
)

// Reentrant is the view of a Backend that turnstile.Reentrant returns:
// locks the same owner may take again while it holds them, without
// waiting for itself. Each
// acquisition counts: the owner must release as many times as it
// acquired, and only the last release frees the lock. Owner identity is
// explicit — give the Client turnstile.WithOwner(id) for the calls that
// may nest; without it every lease has a fresh owner and nothing nests.
//
// The lock on key K is a Redis hash P{K}:reentrant: the holder's owner id
// counts its acquisitions (HINCRBY +1 and −1, deleted at 0), beside the
// fencing token of the first acquisition, which every re-entry returns
// again. Tokens come from K's fence key P{K}:fence, as the plain lock's
// do, so they increase across both kinds; the lock itself is a different
// Redis key, so a reentrant and a plain lock on one name do not exclude
// each other. The last release publishes on P{K}:released, where Client
// waiters listen.
//
// A re-entry and Extend make the lock live at least their TTL from now,
// never less than it had: each of the owner's leases is renewed by the
// Client's watchdog on its own schedule, and none may cut the others
// short. When an Acquire's reply is lost the Client cannot tell whether
// it counted, so it leaves a fixed owner's lock to expire after its TTL.
type Reentrant struct {
	b *Backend
}

var (
	_ driver.Backend       = (*Reentrant)(nil)
	_ driver.BatchExtender = (*Reentrant)(nil)
	_ driver.Notifier      = (*Reentrant)(nil)
	_ driver.Namer         = (*Reentrant)(nil)
)

// Name implements driver.Namer.
func (r *Reentrant) Name() string { return r.b.Name() + " reentrant" }

// Released implements driver.Notifier: the final release of key is
// published where the plain lock's releases are.
func (r *Reentrant) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return r.b.Released(ctx, key)
}

func (r *Reentrant) call(key, owner string, ttl time.Duration) call {
	n := r.b.names(key)
	lockTTL, fenceTTL := r.b.ttlArgs(ttl)
	return call{keys: []string{n.kindKey(rediskeys.Reentrant), n.fence}, args: []string{owner, lockTTL, fenceTTL}}
}

// Acquire implements driver.Backend. If owner holds key already, it
// counts one more acquisition, extends the TTL and returns the token of
// the first.
func (r *Reentrant) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return 0, false, err
	}
	return leaseOf(r.b.runGrant(ctx, reentrantAcquire, r.call(key, owner, ttl), func(ctx context.Context) { _, _ = r.Release(ctx, key, owner) }))
}

// Extend implements driver.Backend.
func (r *Reentrant) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return false, err
	}
	n, err := r.b.run(ctx, reentrantExtend, r.call(key, owner, ttl))
	return n == 1, err
}

// ExtendMany implements driver.BatchExtender in one pipelined round trip.
func (r *Reentrant) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, func(q driver.ExtendRequest) call { return r.call(q.Key, q.Owner, q.TTL) }, r.b.multi(reentrantExtend))
}

// Release implements driver.Backend: it takes back one acquisition of
// owner, and frees key with the last one. It returns ok=false if owner
// does not hold key.
func (r *Reentrant) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return false, err
	}
	n := r.b.names(key)
	res, err := r.b.run(ctx, reentrantRelease, call{
		keys: []string{n.kindKey(rediskeys.Reentrant), n.fence},
		args: []string{owner, r.b.cfg.graceArg, n.channel},
	})
	return res == 1, err
}
