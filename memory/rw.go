package memory

import (
	"context"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// rwLock is a read-write lock of a Backend, shared by its two sides.
type rwLock struct {
	b     *Backend
	claim time.Duration
}

// rwHold is one key's read-write lock.
type rwHold struct {
	writer  string
	wtoken  uint64
	wexp    time.Time
	readers holders
	rtokens map[string]uint64
	claims  holders // waiting writers
}

// hold returns key's lock with expired holds and claims pruned, made if
// absent.
func (rw *rwLock) hold(key string, now time.Time) *rwHold {
	h := rw.b.kinds.rws[key]
	if h == nil {
		h = &rwHold{readers: holders{}, rtokens: map[string]uint64{}, claims: holders{}}
		rw.b.kinds.rws[key] = h
	}
	h.readers.prune(now)
	h.claims.prune(now)
	if h.writer != "" && !now.Before(h.wexp) {
		h.writer = ""
	}
	return h
}

// change runs f on key's hold under the kinds' lock, with the time, and
// forgets the hold if f left it empty: the renewals and releases of both
// sides.
func (rw *rwLock) change(ctx context.Context, key string, f func(h *rwHold, now time.Time) bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := &rw.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := rw.hold(key, now)
	defer rw.tidy(key, h)
	return f(h, now), nil
}

// tidy forgets key's lock once nothing is left of it.
func (rw *rwLock) tidy(key string, h *rwHold) {
	if h.writer == "" && len(h.readers) == 0 && len(h.claims) == 0 {
		delete(rw.b.kinds.rws, key)
	}
}

// ReadLock is the read side of a Backend's read-write lock, whose two
// sides turnstile.ReadWrite returns (ReadLock and WriteLock), each a
// driver.Backend for a Client of its own: any number of readers hold a
// key together, or one writer holds it alone. The read side is
// driver.Shared.
//
// Policy: writer preference, as on the other stores whose writers claim
// the lock. A writer that finds the lock held leaves a claim, and while
// any claim is live no new reader gets in; readers already inside finish
// (or expire), then the writer enters. So a stream of readers cannot
// starve writers. A claim expires when its writer has not attempted
// again for the claim time (turnstile.WithWriterClaim), so a writer that
// gave up blocks new readers for at most that long.
//
// Both sides show and remove the lock's holders (Inspect, List,
// ForceRelease), as the other kinds' views do.
type ReadLock struct{ rw *rwLock }

// WriteLock is the write side of the read-write lock ReadLock describes.
type WriteLock struct{ rw *rwLock }

var (
	_ driver.Backend       = (*ReadLock)(nil)
	_ driver.BatchExtender = (*ReadLock)(nil)
	_ driver.Shared        = (*ReadLock)(nil)
	_ driver.Namer         = (*ReadLock)(nil)
	_ driver.Backend       = (*WriteLock)(nil)
	_ driver.BatchExtender = (*WriteLock)(nil)
	_ driver.Namer         = (*WriteLock)(nil)
)

// Name implements driver.Namer.
func (r *ReadLock) Name() string { return "memory read" }

// Shared implements driver.Shared: readers hold a key together.
func (r *ReadLock) Shared() bool { return true }

// Acquire implements driver.Backend: owner reads key unless a writer
// holds it or waits for it.
func (r *ReadLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	k := &r.rw.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := r.rw.hold(key, now)
	if _, in := h.readers[owner]; !in && (h.writer != "" || len(h.claims) > 0) {
		r.rw.tidy(key, h)
		return 0, false, nil
	}
	tok := r.rw.b.tokens.Add(1)
	h.readers[owner], h.rtokens[owner] = now.Add(ttl), tok
	return tok, true, nil
}

// Extend implements driver.Backend.
func (r *ReadLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return r.rw.change(ctx, key, func(h *rwHold, now time.Time) bool {
		if !h.readers.live(owner, now) {
			return false
		}
		h.readers[owner] = now.Add(ttl)
		return true
	})
}

// ExtendMany implements driver.BatchExtender.
func (r *ReadLock) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, r.Extend)
}

// Release implements driver.Backend.
func (r *ReadLock) Release(ctx context.Context, key, owner string) (bool, error) {
	return r.rw.change(ctx, key, func(h *rwHold, now time.Time) bool {
		if !h.readers.live(owner, now) {
			return false
		}
		delete(h.readers, owner)
		delete(h.rtokens, owner)
		return true
	})
}

// Name implements driver.Namer.
func (w *WriteLock) Name() string { return "memory write" }

// Acquire implements driver.Backend: owner writes key if no other writer
// and no reader holds it; otherwise it leaves a claim that keeps new
// readers out.
func (w *WriteLock) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	k := &w.rw.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := w.rw.hold(key, now)
	if (h.writer != "" && h.writer != owner) || len(h.readers) > 0 {
		h.claims[owner] = now.Add(w.rw.claim)
		return 0, false, nil
	}
	delete(h.claims, owner)
	h.writer, h.wtoken, h.wexp = owner, w.rw.b.tokens.Add(1), now.Add(ttl)
	return h.wtoken, true, nil
}

// Extend implements driver.Backend.
func (w *WriteLock) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return w.rw.change(ctx, key, func(h *rwHold, now time.Time) bool {
		if h.writer != owner {
			return false
		}
		h.wexp = now.Add(ttl)
		return true
	})
}

// ExtendMany implements driver.BatchExtender.
func (w *WriteLock) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return extendMany(ctx, reqs, w.Extend)
}

// Release implements driver.Backend.
func (w *WriteLock) Release(ctx context.Context, key, owner string) (bool, error) {
	return w.rw.change(ctx, key, func(h *rwHold, _ time.Time) bool {
		if h.writer != owner {
			return false
		}
		h.writer = ""
		return true
	})
}
