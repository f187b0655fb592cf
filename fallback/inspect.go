package fallback

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

// Inspect implements driver.Inspector by asking the store that serves
// acquisitions now (Serving), through the breaker as every call to the
// primary goes. A lock the other store granted before the last switch of
// stores is not seen: it expires there within the switch grace. The error
// matches turnstile.ErrUnsupported if that store cannot be inspected.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	s, in, err := b.inspector(ctx)
	if err != nil {
		return driver.LockState{}, err
	}
	var st driver.LockState
	err = b.do(ctx, s, func(driver.Backend) (err error) {
		st, err = in.Inspect(ctx, key)
		return err
	})
	return st, err
}

// List implements driver.Inspector by listing the locks of the store that
// serves acquisitions now, as Inspect asks it; that store's List says
// how it scans. The lock that keeps the pair's state in the secondary is
// left out: it is no lock of the Client's.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	s, in, err := b.inspector(ctx)
	if err != nil {
		return nil, false, err
	}
	var states []driver.LockState
	var more bool
	err = b.do(ctx, s, func(driver.Backend) (err error) {
		states, more, err = in.List(ctx, prefix, limit)
		return err
	})
	if s == secondary {
		states = slices.DeleteFunc(states, func(st driver.LockState) bool { return strings.HasPrefix(st.Key, b.regPrefix) })
	}
	return states, more, err
}

// ForceRelease implements driver.ForceReleaser by removing the lock in
// the store that serves acquisitions now, which raises its fence first. A
// lock the other store granted before the last switch is left to expire
// there: no acquisition reaches that store until the pair switches back,
// after the grace, by which time the lock has expired. The key of the
// pair's state is refused (turnstile.ErrInvalidKey).
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if strings.HasPrefix(key, b.regPrefix) {
		return driver.LockState{}, fmt.Errorf("%w: %q keeps the fallback pair's state, not a lock: removing it could let both stores grant a key", turnstile.ErrInvalidKey, key)
	}
	s, err := b.operatorCall(ctx)
	if err != nil {
		return driver.LockState{}, err
	}
	fr, ok := b.stores[s].(driver.ForceReleaser)
	if !ok {
		return driver.LockState{}, fmt.Errorf("%w: fallback store %s cannot remove a lock by force (no driver.ForceReleaser)", turnstile.ErrUnsupported, b.names[s])
	}
	var st driver.LockState
	err = b.do(ctx, s, func(driver.Backend) (err error) {
		st, err = fr.ForceRelease(ctx, key)
		return err
	})
	return st, err
}

// inspector returns the store serving acquisitions and its Inspector. A
// store without one is no store failure: the breaker never hears of it.
func (b *Backend) inspector(ctx context.Context) (store, driver.Inspector, error) {
	s, err := b.operatorCall(ctx)
	if err != nil {
		return s, nil, err
	}
	in, ok := b.stores[s].(driver.Inspector)
	if !ok {
		return s, nil, fmt.Errorf("%w: fallback store %s cannot be inspected (no driver.Inspector)", turnstile.ErrUnsupported, b.names[s])
	}
	return s, in, nil
}

// operatorCall checks ctx and returns the store that serves acquisitions
// now, or will once the grace of a switch has run, after reading the
// pair's state if this process has not lately.
func (b *Backend) operatorCall(ctx context.Context) (store, error) {
	if ctx == nil {
		return primary, fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if err := ctx.Err(); err != nil {
		return primary, err
	}
	d, err := b.route(ctx, 0, false)
	if err != nil {
		return primary, err
	}
	return d.store, nil
}
