package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Semaphore is the view of a Backend that turnstile.Semaphore returns: up
// to a fixed number of owners hold each key at once, each lease one
// permit. Permits expire
// like locks. The number of permits is stored with the key's holders:
// while any permit is held, an acquisition through a Semaphore made with
// another number is refused with a PermitsError (turnstile.ErrInvalidOption)
// naming both; once none is held, the next acquisition's number holds.
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
	_ driver.Shared        = (*Semaphore)(nil)
	_ driver.Namer         = (*Semaphore)(nil)
	_ driver.Inspector     = (*Semaphore)(nil)
	_ driver.ForceReleaser = (*Semaphore)(nil)
)

// semHold is a key's permits and their number.
type semHold struct {
	permits int
	holders holders
	tokens  map[string]uint64
}

// Permits returns how many owners may hold a key at once.
func (s *Semaphore) Permits() int { return s.permits }

// Name implements driver.Namer.
func (s *Semaphore) Name() string { return fmt.Sprintf("memory semaphore(%d)", s.permits) }

// Shared implements driver.Shared.
func (s *Semaphore) Shared() bool { return s.permits > 1 }

// live returns key's permits with the expired ones pruned, or nil when
// none is held (and forgets the key then).
func (s *Semaphore) live(key string, now time.Time) *semHold {
	h := s.b.kinds.sems[key]
	if h == nil {
		return nil
	}
	h.holders.prune(now)
	if len(h.holders) == 0 {
		delete(s.b.kinds.sems, key)
		return nil
	}
	return h
}

// Acquire implements driver.Backend: it takes one permit of key for
// owner if one is free. While key's permits are held with another number
// than s's, it returns a PermitsError.
func (s *Semaphore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	k := &s.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := s.live(key, now)
	if h == nil {
		h = &semHold{permits: s.permits, holders: holders{}, tokens: map[string]uint64{}}
		k.sems[key] = h
	}
	if h.permits != s.permits {
		return 0, false, &PermitsError{Key: key, Held: h.permits, Asked: s.permits}
	}
	if _, again := h.holders[owner]; !again && len(h.holders) >= h.permits {
		return 0, false, nil
	}
	tok := s.b.tokens.Add(1)
	h.holders[owner], h.tokens[owner] = now.Add(ttl), tok
	return tok, true, nil
}

// Extend implements driver.Backend: it renews owner's permit only.
func (s *Semaphore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return s.permit(ctx, key, owner, func(h *semHold, now time.Time) { h.holders[owner] = now.Add(ttl) })
}

// permit runs change on key's permits, with the kinds locked, if owner
// holds one that has not expired; it reports whether it did.
func (s *Semaphore) permit(ctx context.Context, key, owner string, change func(h *semHold, now time.Time)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := &s.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := s.live(key, now)
	if h == nil || !h.holders.live(owner, now) {
		return false, nil
	}
	change(h, now)
	return true, nil
}

// ExtendMany implements driver.BatchExtender.
func (s *Semaphore) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, s.Extend)
}

// Release implements driver.Backend: it returns owner's permit.
func (s *Semaphore) Release(ctx context.Context, key, owner string) (bool, error) {
	return s.permit(ctx, key, owner, func(h *semHold, now time.Time) {
		delete(h.holders, owner)
		delete(h.tokens, owner)
		s.live(key, now) // forget the number with the last permit
	})
}

func semState(key string, h *semHold, now time.Time) driver.LockState {
	st := driver.LockState{Key: key, Waiters: -1}
	if h == nil {
		return st
	}
	st.Holders = h.holders.list(now, func(o string) uint64 { return h.tokens[o] })
	for _, x := range st.Holders {
		st.Held, st.Token = true, max(st.Token, x.Token)
	}
	return st
}

// holds are the permits of s's Backend.
func (s *Semaphore) holds() kindHolds[*semHold] {
	return kindHolds[*semHold]{s.b, func(k *kinds) map[string]*semHold { return k.sems }, semState}
}

// Inspect implements driver.Inspector: every live permit with its token.
func (s *Semaphore) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return s.holds().inspect(ctx, key)
}

// List implements driver.Inspector.
func (s *Semaphore) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return s.holds().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: it takes back every
// permit of key. The returned Token is the token counter, which every
// later token passes.
func (s *Semaphore) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return s.holds().forceRelease(ctx, key)
}
