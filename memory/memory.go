// Package memory is an in-process lock store with the same semantics as
// the networked backends: owner-checked release and extend, TTL expiry and
// strictly increasing fencing tokens.
//
// It coordinates goroutines of one process only. Use it in tests, in
// examples, and where every contender lives in one process (up to about
// 100 lock requests a second an in-process lock is the right tool; see the
// load table in docs/backends.md).
package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

const shards = 64

// Backend is an in-process lock store. The zero value is not usable; call
// New.
type Backend struct {
	seed   maphash.Seed
	tokens atomic.Uint64 // one counter for every key: strictly increasing per key, no memory per key
	shards [shards]shard
	kinds  kinds // the lock kinds' state (kinds.go)
}

type shard struct {
	mu    sync.Mutex
	locks map[string]entry
	_     [40]byte // keep shards on separate cache lines
}

type entry struct {
	owner   string
	token   uint64
	expires time.Time
}

var (
	_ driver.Backend       = (*Backend)(nil)
	_ driver.BatchExtender = (*Backend)(nil)
	_ driver.Fencer        = (*Backend)(nil)
	_ driver.TTLHolder     = (*Backend)(nil)
)

// New returns an empty store.
func New() *Backend {
	b := &Backend{seed: maphash.MakeSeed()}
	for i := range b.shards {
		b.shards[i].locks = make(map[string]entry)
	}
	return b
}

// Name implements driver.Namer.
func (b *Backend) Name() string { return "memory" }

// HoldsTTL implements driver.TTLHolder: a lock lasts the TTL of its last
// Acquire or Extend and ends with nothing else. The lock kinds' views
// (semaphores, read-write locks, reentrant and fair locks) do not offer
// it: a lock delay is for the plain exclusive lock.
func (b *Backend) HoldsTTL() bool { return true }

func (b *Backend) shard(key string) *shard {
	return &b.shards[maphash.String(b.seed, key)%shards]
}

// lockShard locks key's shard, unless ctx has ended, and returns it with
// the time read just before; the caller unlocks it.
func (b *Backend) lockShard(ctx context.Context, key string) (*shard, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, err
	}
	s := b.shard(key)
	now := time.Now()
	s.mu.Lock()
	return s, now, nil
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	s, now, err := b.lockShard(ctx, key)
	if err != nil {
		return 0, false, err
	}
	defer s.mu.Unlock()
	s.sweep(now)
	if e, held := s.locks[key]; held && now.Before(e.expires) && e.owner != owner {
		return 0, false, nil
	}
	// Free, expired, or already ours (a retry after a lost reply): take it
	// with a new token.
	tok := b.tokens.Add(1)
	s.locks[key] = entry{owner: owner, token: tok, expires: now.Add(ttl)}
	return tok, true, nil
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return b.live(ctx, key, owner, func(e *entry, now time.Time) { e.expires = now.Add(ttl) })
}

// live runs change on key's entry, with its shard locked, if owner holds
// key and its lease has not expired; it reports whether it did.
func (b *Backend) live(ctx context.Context, key, owner string, change func(e *entry, now time.Time)) (bool, error) {
	s, now, err := b.lockShard(ctx, key)
	if err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	e, held := s.locks[key]
	if !held || e.owner != owner || !now.Before(e.expires) {
		return false, nil
	}
	change(&e, now)
	s.locks[key] = e
	return true, nil
}

// ExtendMany implements driver.BatchExtender.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		res[i].OK, res[i].Err = b.Extend(ctx, r.Key, r.Owner, r.TTL)
	}
	return res
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	s, now, err := b.lockShard(ctx, key)
	if err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	e, held := s.locks[key]
	if !held || e.owner != owner {
		return false, nil
	}
	delete(s.locks, key)
	return now.Before(e.expires), nil
}

// RaiseFence implements driver.Fencer. Tokens come from one counter for
// all keys, so raising it keeps later tokens greater; the holder's own
// token is raised too, as a Redis node's fence key is, so that Inspect
// reports the token written back (a Redlock of these nodes reports the
// token a quorum of them agrees on, which is then its lease's).
func (b *Backend) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	// The counter is raised with the shard locked: a release of key
	// cannot come in between and let a new holder draw a lower token.
	return b.live(ctx, key, owner, func(e *entry, _ time.Time) {
		e.token = max(e.token, token)
		for {
			cur := b.tokens.Load()
			if cur >= token || b.tokens.CompareAndSwap(cur, token) {
				return
			}
		}
	})
}

// Holder describes who holds key: the owner id, the fencing token and the
// time left. ok is false if nobody holds it.
func (b *Backend) Holder(key string) (owner string, token uint64, left time.Duration, ok bool) {
	s := b.shard(key)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, held := s.locks[key]
	if !held || !now.Before(e.expires) {
		return "", 0, 0, false
	}
	return e.owner, e.token, e.expires.Sub(now), true
}

// Evict removes key whoever holds it, as an operator (or an eviction
// policy) would behind the holder's back. The holder finds out at its next
// renewal.
func (b *Backend) Evict(key string) bool {
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.locks[key]
	delete(s.locks, key)
	return held
}

// Len returns how many entries the store keeps, expired ones not yet swept
// included.
func (b *Backend) Len() int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		n += len(s.locks)
		s.mu.Unlock()
	}
	return n
}

// sweep drops a few expired entries, so that keys nobody touches again do
// not stay forever (as Redis samples keys for active expiry). Map
// iteration starts at a random place, so every entry is visited in time.
func (s *shard) sweep(now time.Time) {
	n := 0
	for k, e := range s.locks {
		if !now.Before(e.expires) {
			delete(s.locks, k)
		}
		if n++; n == 4 {
			return
		}
	}
}
