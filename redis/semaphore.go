package redis

import (
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

var (
	//go:embed semaphore_acquire.lua
	semaphoreAcquireLua string

	semaphoreAcquire = newKindScript(tokenLua + semaphoreAcquireLua)
)

// Semaphore is the view of a Backend that turnstile.Semaphore returns: up
// to a fixed number of owners hold each key at once, each lease one
// permit. Permits expire
// like locks, so the Client's watchdog renews them, and a crashed
// holder's permit comes back after its TTL. Every permit gets a fencing
// token from the key's fence key, as the plain lock's do.
//
// The permits of key K are the sorted set P{K}:semaphore, owners scored
// by the expiry of each one's permit; expired permits are pruned with one
// ZREMRANGEBYSCORE, never a loop. Every release publishes on
// P{K}:released, where Client waiters listen.
//
// The number of permits is stored beside the set, in P{K}:semaphore:permits
// (same hash slot), written by every acquisition, renewed with the
// permits and deleted with the last one. While any permit of K is held,
// an acquisition through a Semaphore made with another number is refused
// with an error matching turnstile.ErrInvalidOption that names both
// numbers: two processes never disagree about it. Once no permit is held,
// the next acquisition's number holds. Permits held by an earlier version
// of this package, which stored no number, are counted against the
// caller's number, as that version did.
//
// A Semaphore is driver.Shared: a Client's waiters contend on their own
// rather than in its local line, so they take free permits together.
type Semaphore struct {
	b       *Backend
	permits int
}

var (
	_ driver.Backend       = (*Semaphore)(nil)
	_ driver.BatchExtender = (*Semaphore)(nil)
	_ driver.Notifier      = (*Semaphore)(nil)
	_ driver.Namer         = (*Semaphore)(nil)
)

// Permits returns how many owners may hold a key at once.
func (s *Semaphore) Permits() int { return s.permits }

// Name implements driver.Namer.
func (s *Semaphore) Name() string { return fmt.Sprintf("%s semaphore(%d)", s.b.Name(), s.permits) }

// Shared implements driver.Shared: up to permits holders at once, so a
// Client lets its waiters contend on their own.
func (s *Semaphore) Shared() bool { return s.permits > 1 }

// Released implements driver.Notifier: every returned permit is
// published where the plain lock's releases are.
func (s *Semaphore) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return s.b.Released(ctx, key)
}

func (s *Semaphore) call(key, owner string, ttl time.Duration) call {
	n := s.b.names(key)
	lockTTL, fenceTTL := s.b.ttlArgs(ttl)
	return call{keys: []string{n.kindKey(rediskeys.Semaphore), n.fence, n.kindKey(rediskeys.SemaphorePermits)}, args: []string{owner, lockTTL, fenceTTL}}
}

// Acquire implements driver.Backend: it takes one permit of key for
// owner if one is free. While key's permits are held with another
// number than s's, it returns an error matching turnstile.ErrInvalidOption
// that names both.
func (s *Semaphore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return 0, false, err
	}
	c := s.call(key, owner, ttl)
	c.args = append(c.args, strconv.Itoa(s.permits))
	tok, err := s.b.runGrant(ctx, semaphoreAcquire, c, func(ctx context.Context) { _, _ = s.Release(ctx, key, owner) })
	if err != nil {
		return 0, false, err
	}
	if tok < 0 {
		return 0, false, fmt.Errorf("%w: the permits of %q are held with %d permits; this semaphore has %d", turnstile.ErrInvalidOption, key, -tok, s.permits)
	}
	return uint64(tok), tok > 0, nil
}

// Extend implements driver.Backend: it renews owner's permit only.
func (s *Semaphore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ctx, key, owner, ttl); err != nil {
		return false, err
	}
	n, err := s.b.run(ctx, memberExtend, s.call(key, owner, ttl))
	return n == 1, err
}

// ExtendMany implements driver.BatchExtender in one pipelined round trip.
func (s *Semaphore) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, func(q driver.ExtendRequest) call { return s.call(q.Key, q.Owner, q.TTL) }, s.b.multi(memberExtend))
}

// Release implements driver.Backend: it returns owner's permit.
func (s *Semaphore) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return false, err
	}
	n := s.b.names(key)
	r, err := s.b.run(ctx, memberRelease, call{
		keys: []string{n.kindKey(rediskeys.Semaphore), n.fence, n.kindKey(rediskeys.SemaphorePermits)},
		args: []string{owner, s.b.cfg.graceArg, n.channel, "1"},
	})
	return r == 1, err
}
