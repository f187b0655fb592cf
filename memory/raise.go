package memory

import (
	"context"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// The reentrant lock and both sides of the read-write lock raise the
// token counter as the plain lock does, so that a Redlock of such views
// writes its tokens back.
var (
	_ driver.Fencer = (*Reentrant)(nil)
	_ driver.Fencer = (*ReadLock)(nil)
	_ driver.Fencer = (*WriteLock)(nil)
)

// raise raises the token counter to token if held, under the kinds' lock.
func (b *Backend) raise(ctx context.Context, token uint64, held func(now time.Time) bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := &b.kinds
	k.lock()
	defer k.mu.Unlock()
	if !held(time.Now()) {
		return false, nil
	}
	for {
		cur := b.tokens.Load()
		if cur >= token || b.tokens.CompareAndSwap(cur, token) {
			return true, nil
		}
	}
}

// RaiseFence implements driver.Fencer: if owner holds key, every later
// token is greater than token.
func (r *Reentrant) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return r.b.raise(ctx, token, func(now time.Time) bool {
		h := r.b.kinds.reentrant[key]
		return h != nil && h.owner == owner && now.Before(h.expires)
	})
}

// RaiseFence implements driver.Fencer for a reader, as Reentrant's.
func (r *ReadLock) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return r.rw.b.raise(ctx, token, func(now time.Time) bool {
		h := r.rw.b.kinds.rws[key]
		return h != nil && h.readers.live(owner, now)
	})
}

// RaiseFence implements driver.Fencer for the writer, as Reentrant's.
func (w *WriteLock) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return w.rw.b.raise(ctx, token, func(now time.Time) bool {
		h := w.rw.b.kinds.rws[key]
		return h != nil && h.writer == owner && now.Before(h.wexp)
	})
}
