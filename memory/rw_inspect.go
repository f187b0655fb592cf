package memory

import (
	"context"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Both sides of a read-write lock show and remove its holders, as the
// other kinds' views do, so that code that inspects every kind (the
// operator commands, or tests of such code) sees a held read-write lock.
var (
	_ driver.Inspector     = (*ReadLock)(nil)
	_ driver.ForceReleaser = (*ReadLock)(nil)
	_ driver.Inspector     = (*WriteLock)(nil)
	_ driver.ForceReleaser = (*WriteLock)(nil)
)

// rwState describes h, key's read-write lock (nil if there is none): its
// writer or its readers, each with its token. The store keeps no queue
// (waiting writers leave claims): Waiters is -1.
func rwState(key string, h *rwHold, now time.Time) driver.LockState {
	st := driver.LockState{Key: key, Waiters: -1}
	if h == nil {
		return st
	}
	if h.writer != "" && now.Before(h.wexp) {
		st.Holders = append(st.Holders, driver.Holder{Owner: h.writer, Token: h.wtoken, TTL: h.wexp.Sub(now)})
	}
	st.Holders = append(st.Holders, h.readers.list(now, func(o string) uint64 { return h.rtokens[o] })...)
	for _, x := range st.Holders {
		st.Held, st.Token = true, max(st.Token, x.Token)
	}
	return st
}

// holds are the read-write locks of rw's Backend.
func (rw *rwLock) holds() kindHolds[*rwHold] {
	return kindHolds[*rwHold]{rw.b, func(k *kinds) map[string]*rwHold { return k.rws }, rwState}
}

// forceRelease removes key's writer and readers; waiting writers keep
// their claims. The returned Token is the token counter, which every
// later token passes.
func (rw *rwLock) forceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	k := &rw.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	h := rw.hold(key, now)
	st := rwState(key, h, now)
	h.writer, h.readers, h.rtokens = "", holders{}, map[string]uint64{}
	rw.tidy(key, h)
	st.Token = rw.b.tokens.Load()
	return st, nil
}

// Inspect implements driver.Inspector: the writer or the readers of
// key, each with its token. Both sides see the same state.
func (r *ReadLock) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return r.rw.holds().inspect(ctx, key)
}

// List implements driver.Inspector.
func (r *ReadLock) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return r.rw.holds().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: the writer and every
// reader go at once.
func (r *ReadLock) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return r.rw.forceRelease(ctx, key)
}

// Inspect implements driver.Inspector, as ReadLock's.
func (w *WriteLock) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return w.rw.holds().inspect(ctx, key)
}

// List implements driver.Inspector, as ReadLock's.
func (w *WriteLock) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return w.rw.holds().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser, as ReadLock's.
func (w *WriteLock) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return w.rw.forceRelease(ctx, key)
}
