package memory

import (
	"context"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

// Inspect implements driver.Inspector. The store keeps no queue: Waiters
// is -1. Token is the holder's token; a free key reports 0, since tokens
// come from one counter for every key.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	s, now, err := b.lockShard(ctx, key)
	if err != nil {
		return driver.LockState{}, err
	}
	defer s.mu.Unlock()
	return state(key, s.locks[key], now), nil
}

// state describes e, the entry of key (the zero entry if there is none).
func state(key string, e entry, now time.Time) driver.LockState {
	st := driver.LockState{Key: key, Waiters: -1}
	if !now.Before(e.expires) { // no entry (zero expiry), or expired
		return st
	}
	st.Held, st.Token = true, e.token
	st.Holders = []driver.Holder{{Owner: e.owner, Token: e.token, TTL: e.expires.Sub(now)}}
	return st
}

// List implements driver.Inspector. It walks every entry of the store
// (O(keys held), shard by shard, each shard locked while it is read), so
// it suits the few thousand locks one process holds.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var out []driver.LockState
	now := time.Now()
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for k, e := range s.locks {
			if !strings.HasPrefix(k, prefix) || !now.Before(e.expires) {
				continue
			}
			if len(out) == limit {
				s.mu.Unlock()
				return out, true, nil
			}
			out = append(out, state(k, e, now))
		}
		s.mu.Unlock()
	}
	return out, false, nil
}

// ForceRelease implements driver.ForceReleaser. Tokens come from one
// counter for every key, which has passed every token issued so far: the
// returned Token is that counter, and every later token is greater. The
// store sends no release notices; waiters find the lock free on their
// next attempt.
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	s, now, err := b.lockShard(ctx, key)
	if err != nil {
		return driver.LockState{}, err
	}
	defer s.mu.Unlock()
	st := state(key, s.locks[key], now)
	delete(s.locks, key)
	st.Token = b.tokens.Load()
	return st, nil
}
