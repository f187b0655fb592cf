package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// errNotConnected is the error, wrapped with the last attempt's, of a
// call to a store of a pair opened from a URL that has not connected
// yet: it could not be reached when the pair was opened, nor since.
var errNotConnected = errors.New("not connected")

// redialAfter is how long a store that refused to connect is left alone
// before a call tries to connect again.
const redialAfter = time.Second

// redialTimeout bounds one attempt to connect a store, beside the
// caller's context: a store that does not answer must not hold a call
// for its driver's own dial timeouts.
const redialTimeout = 5 * time.Second

// lazyStore is a store of a pair opened from a URL, connected by an
// attempt of its own: the pair uses it as it is when the store could not
// be reached by the time Open returned. A call then connects it, at most
// once per redialAfter, and fails with errNotConnected until it has. Its
// kinds' views connect with it.
//
// An attempt runs on its own, bounded by redialTimeout: a caller that
// gives up waiting for it (its context ends, or Open stops waiting) does
// not end it, and a later call uses what it got. Close does not wait for
// it either; it closes what the attempt connects.
type lazyStore struct {
	name string // the redacted URL
	dial func(context.Context) (*turnstile.Client, error)

	mu      sync.Mutex
	client  *turnstile.Client // nil until connected
	err     error             // the last attempt's error
	retryAt time.Time         // no attempt before this
	dialing chan struct{}     // closed when the attempt under way ends; nil if none is
	closed  bool
}

var (
	_ driver.Backend        = (*lazyStore)(nil)
	_ driver.Namer          = (*lazyStore)(nil)
	_ driver.NoticeReleaser = (*lazyStore)(nil)
	_ driver.Inspector      = (*lazyStore)(nil)
	_ driver.ForceReleaser  = (*lazyStore)(nil)
	_ driver.Reentranter    = (*lazyStore)(nil)
	_ driver.Semaphorer     = (*lazyStore)(nil)
	_ driver.ReadWriter     = (*lazyStore)(nil)
)

// Name implements driver.Namer: the store's redacted URL.
func (l *lazyStore) Name() string { return l.name }

// HoldsTTL implements driver.TTLHolder as the connected store does.
// Before it has connected it says yes: it connects with the Client's
// lock delay (open.go), which turnstile.Open refuses for a store that
// cannot keep it.
func (l *lazyStore) HoldsTTL() bool {
	l.mu.Lock()
	c := l.client
	l.mu.Unlock()
	return c == nil || driver.HoldsTTL(c.Backend())
}

// startLocked starts an attempt to connect, unless one is under way, and
// returns the channel closed when it ends. The attempt is bounded by
// redialTimeout alone: no caller's context ends it.
func (l *lazyStore) startLocked(ctx context.Context) <-chan struct{} {
	if l.dialing != nil {
		return l.dialing
	}
	ch := make(chan struct{})
	l.dialing = ch
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redialTimeout)
	go func() {
		defer cancel()
		c, err := l.dial(dctx)
		l.mu.Lock()
		l.dialing = nil
		close(ch)
		late := err == nil && l.closed
		switch {
		case late:
		case err == nil:
			l.client, l.err = c, nil
		default:
			l.err, l.retryAt = err, time.Now().Add(redialAfter)
		}
		l.mu.Unlock()
		if late {
			_ = c.Close()
		}
	}()
	return ch
}

// connected returns the connected client, or the last attempt's error.
func (l *lazyStore) connected() (*turnstile.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client == nil && l.err == nil {
		return nil, errNotConnected
	}
	return l.client, l.err
}

// get returns the connected store, connecting it if it is time to try.
func (l *lazyStore) get(ctx context.Context) (driver.Backend, error) {
	tried := false
	for {
		l.mu.Lock()
		switch {
		case l.client != nil:
			b := l.client.Backend()
			l.mu.Unlock()
			return b, nil
		case l.closed:
			l.mu.Unlock()
			return nil, fmt.Errorf("%s: %w", l.name, turnstile.ErrClosed)
		case tried || (l.dialing == nil && time.Now().Before(l.retryAt)):
			err := l.err
			l.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", errNotConnected, err)
		}
		done := l.startLocked(ctx)
		l.mu.Unlock()
		select {
		case <-done:
			tried = true
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes the store if it has connected, or once the attempt under
// way connects it; later calls fail.
func (l *lazyStore) Close() error {
	l.mu.Lock()
	l.closed = true
	c := l.client
	l.client = nil
	l.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}

func (l *lazyStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	b, err := l.get(ctx)
	if err != nil {
		return 0, false, err
	}
	return b.Acquire(ctx, key, owner, ttl)
}

func (l *lazyStore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	b, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return b.Extend(ctx, key, owner, ttl)
}

func (l *lazyStore) Release(ctx context.Context, key, owner string) (bool, error) {
	b, err := l.get(ctx)
	if err != nil {
		return false, err
	}
	return b.Release(ctx, key, owner)
}

// ReleaseNotice implements driver.NoticeReleaser with the store's own.
func (l *lazyStore) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (bool, bool, error) {
	b, err := l.get(ctx)
	if err != nil {
		return false, false, err
	}
	return driver.ReleaseNotice(ctx, b, key, owner, n)
}

// Inspect implements driver.Inspector with the store's own; the error
// matches turnstile.ErrUnsupported if it has none.
func (l *lazyStore) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	in, err := l.inspector(ctx)
	if err != nil {
		return driver.LockState{}, err
	}
	return in.Inspect(ctx, key)
}

// List implements driver.Inspector with the store's own.
func (l *lazyStore) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	in, err := l.inspector(ctx)
	if err != nil {
		return nil, false, err
	}
	return in.List(ctx, prefix, limit)
}

func (l *lazyStore) inspector(ctx context.Context) (driver.Inspector, error) {
	b, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	in, ok := b.(driver.Inspector)
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot be inspected (no driver.Inspector)", turnstile.ErrUnsupported, driver.Name(b))
	}
	return in, nil
}

// ForceRelease implements driver.ForceReleaser with the store's own.
func (l *lazyStore) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	b, err := l.get(ctx)
	if err != nil {
		return driver.LockState{}, err
	}
	fr, ok := b.(driver.ForceReleaser)
	if !ok {
		return driver.LockState{}, fmt.Errorf("%w: %s cannot remove a lock by force (no driver.ForceReleaser)", turnstile.ErrUnsupported, driver.Name(b))
	}
	return fr.ForceRelease(ctx, key)
}

// ReentrantView implements driver.Reentranter: the store's reentrant
// view once it has connected.
func (l *lazyStore) ReentrantView(cfg driver.KindConfig) (driver.Backend, error) {
	return &lazyView{l: l, make: func(b driver.Backend) (driver.Backend, error) { return reentrant(b, cfg) }}, nil
}

// SemaphoreView implements driver.Semaphorer: the store's semaphore once
// it has connected.
func (l *lazyStore) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return &lazyView{l: l, make: func(b driver.Backend) (driver.Backend, error) { return semaphore(b, cfg) }}, nil
}

// ReadWriteView implements driver.ReadWriter: the store's read and write
// sides once it has connected.
func (l *lazyStore) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	read = &lazyView{l: l, make: func(b driver.Backend) (driver.Backend, error) {
		r, _, err := readWrite(b, cfg)
		return r, err
	}}
	write = &lazyView{l: l, make: func(b driver.Backend) (driver.Backend, error) {
		_, w, err := readWrite(b, cfg)
		return w, err
	}}
	return read, write, nil
}

// lazyView is a view of a lazyStore's lock kind, made when the store has
// connected. A store without the kind fails every call with an error
// matching turnstile.ErrUnsupported.
type lazyView struct {
	l    *lazyStore
	make func(driver.Backend) (driver.Backend, error)

	mu sync.Mutex
	v  driver.Backend
}

func (v *lazyView) get(ctx context.Context) (driver.Backend, error) {
	b, err := v.l.get(ctx)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.v == nil {
		if v.v, err = v.make(b); err != nil {
			return nil, err
		}
	}
	return v.v, nil
}

// Name implements driver.Namer.
func (v *lazyView) Name() string { return v.l.name }

func (v *lazyView) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	b, err := v.get(ctx)
	if err != nil {
		return 0, false, err
	}
	return b.Acquire(ctx, key, owner, ttl)
}

func (v *lazyView) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	b, err := v.get(ctx)
	if err != nil {
		return false, err
	}
	return b.Extend(ctx, key, owner, ttl)
}

func (v *lazyView) Release(ctx context.Context, key, owner string) (bool, error) {
	b, err := v.get(ctx)
	if err != nil {
		return false, err
	}
	return b.Release(ctx, key, owner)
}

// ReleaseNotice implements driver.NoticeReleaser with the view's own.
func (v *lazyView) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (bool, bool, error) {
	b, err := v.get(ctx)
	if err != nil {
		return false, false, err
	}
	return driver.ReleaseNotice(ctx, b, key, owner, n)
}
