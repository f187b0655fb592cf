package turnstile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MaxKeys is the most keys one AcquireAll takes.
const MaxKeys = 1024

// MultiLease holds the locks on several keys as one: one context, one
// release. Methods are safe for concurrent use.
type MultiLease struct {
	c      *Client
	leases []*Lease // in key order
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool

	mu       sync.Mutex
	released bool
}

// AcquireAll takes the locks on every key, or none. Keys are taken one by
// one in sorted order — every caller takes shared keys in the same order,
// so two callers can never wait for each other in a cycle — and each
// waits as Acquire does, all under ctx (set a deadline on it for one
// overall timeout). If any key cannot be taken, the keys taken so far are
// released before AcquireAll returns the error. Keys must be distinct;
// options apply to every key.
func (c *Client) AcquireAll(ctx context.Context, keys []string, opts ...Option) (*MultiLease, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	sorted, err := sortedKeys(keys)
	if err != nil {
		return nil, err
	}
	leases := make([]*Lease, 0, len(sorted))
	for _, k := range sorted {
		l, err := c.Acquire(ctx, k, opts...)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			var errs []error
			for _, h := range slices.Backward(leases) {
				if rerr := h.Release(rctx); rerr != nil {
					errs = append(errs, rerr)
				}
			}
			if len(errs) > 0 {
				// The locks not released expire after their TTL.
				err = joinErrors(err, fmt.Errorf("turnstile: releasing the %d keys already taken: %w", len(leases), joinErrors(errs...)))
			}
			return nil, err
		}
		leases = append(leases, l)
	}
	m := &MultiLease{c: c, leases: leases}
	m.ctx, m.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	for _, l := range leases {
		m.stops = append(m.stops, context.AfterFunc(l.Context(), func() { m.cancel(context.Cause(l.Context())) }))
	}
	return m, nil
}

// sortedKeys validates keys and returns them sorted.
func sortedKeys(keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidKey)
	}
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys, more than %d", ErrInvalidKey, len(keys), MaxKeys)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for i, k := range sorted {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		if i > 0 && sorted[i-1] == k {
			return nil, fmt.Errorf("%w: key %q given twice", ErrInvalidKey, k)
		}
	}
	return sorted, nil
}

// Keys returns the locked keys, sorted.
func (m *MultiLease) Keys() []string {
	keys := make([]string, len(m.leases))
	for i, l := range m.leases {
		keys[i] = l.Key()
	}
	return keys
}

// Leases returns the lease of each key, in key order. Release them
// through the MultiLease, not one by one.
func (m *MultiLease) Leases() []*Lease { return slices.Clone(m.leases) }

// Token returns the fencing token of key, or 0 if key is not one of the
// locked keys.
func (m *MultiLease) Token(key string) uint64 {
	for _, l := range m.leases {
		if l.Key() == key {
			return l.Token()
		}
	}
	return 0
}

// Context returns a context that is cancelled when the first of the
// leases ends: its cause matches ErrLockLost if one was lost, ErrReleased
// after Release, ErrClosed after Client.Close.
func (m *MultiLease) Context() context.Context { return m.ctx }

// Validity returns the smallest validity of the leases: how long every
// key is certainly still held.
func (m *MultiLease) Validity() time.Duration {
	v := m.leases[0].Validity()
	for _, l := range m.leases[1:] {
		v = min(v, l.Validity())
	}
	return v
}

// Extend renews every lease for ttl from now. It returns the errors of
// the leases it could not renew, joined.
func (m *MultiLease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	errs := make([]error, len(m.leases))
	var wg sync.WaitGroup
	for i, l := range m.leases {
		wg.Go(func() { errs[i] = l.Extend(ctx, ttl) })
	}
	wg.Wait()
	return joinErrors(errs...)
}

// Release frees every key, in reverse order, and cancels the context with
// ErrReleased. It returns the errors of the keys it could not release,
// joined (ErrNotHeld for a key that was lost meanwhile); those locks
// expire after their TTL. A second Release is refused with ErrNotHeld.
func (m *MultiLease) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	m.mu.Lock()
	if m.released {
		m.mu.Unlock()
		return m.c.wrap("release", m.leases[0].Key(), fmt.Errorf("%w: released already", ErrNotHeld))
	}
	m.released = true
	m.mu.Unlock()
	for _, stop := range m.stops {
		stop()
	}
	m.cancel(ErrReleased)
	var errs []error
	for _, l := range slices.Backward(m.leases) {
		if err := l.Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return joinErrors(errs...)
}

// DoAll is Do for several keys: it takes them all (AcquireAll), runs fn,
// and releases them. fn's context is cancelled when ctx is done or any of
// the leases is lost; then DoAll's error matches ErrLockLost.
func DoAll(ctx context.Context, c *Client, keys []string, fn func(ctx context.Context, m *MultiLease) error, opts ...Option) error {
	if c == nil {
		return ErrNilClient
	}
	if fn == nil {
		return joinErrors(ErrInvalidOption, errors.New("turnstile: nil function"))
	}
	m, err := c.AcquireAll(ctx, keys, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(m.Context(), func() { cancel(context.Cause(m.Context())) })
	ferr := fn(fctx, m)
	stop()
	cancel(nil)

	lost := errors.Is(context.Cause(m.Context()), ErrLockLost)
	cause := context.Cause(m.Context())
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	rerr := m.Release(rctx)

	var errs []error
	if ferr != nil {
		errs = append(errs, ferr)
	}
	if lost {
		errs = append(errs, c.wrap("hold", m.leases[0].Key(), cause))
	} else if rerr != nil {
		errs = append(errs, rerr)
	}
	return joinErrors(errs...)
}
