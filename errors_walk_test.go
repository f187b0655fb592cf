package turnstile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// sentinels are the errors errors.go promises every returned error wraps.
var sentinels = []error{
	turnstile.ErrNotAcquired, turnstile.ErrLockLost, turnstile.ErrReleased, turnstile.ErrNotHeld, turnstile.ErrInvalidKey,
	turnstile.ErrInvalidTTL, turnstile.ErrInvalidOption, turnstile.ErrNilBackend, turnstile.ErrNilClient,
	turnstile.ErrUnknownScheme, turnstile.ErrInvalidURL, turnstile.ErrClosed, turnstile.ErrRateLimited,
	turnstile.ErrUnsupported, turnstile.ErrPermission,
}

// errDown is what a store that is down answers every call with.
var errDown = errors.New("down: connection refused")

// noCaps hides the optional capabilities of a backend.
type noCaps struct{ driver.Backend }

// down is a store whose every call fails.
type down struct{}

func (down) Acquire(context.Context, string, string, time.Duration) (uint64, bool, error) {
	return 0, false, errDown
}
func (down) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return false, errDown
}
func (down) Release(context.Context, string, string) (bool, error) { return false, errDown }
func (down) Inspect(context.Context, string) (driver.LockState, error) {
	return driver.LockState{}, errDown
}
func (down) List(context.Context, string, int) ([]driver.LockState, error) { return nil, errDown }
func (down) ForceRelease(context.Context, string) (driver.LockState, error) {
	return driver.LockState{}, errDown
}

// wrapsAPromise reports whether err keeps errors.go's promise: it wraps a
// sentinel or a context error, or, for a store that failed, it is a
// *turnstile.LockError naming the operation and wrapping the store's own error.
func wrapsAPromise(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var le *turnstile.LockError
	return errors.As(err, &le) && le.Op != "" && errors.Is(err, errDown)
}

// TestErrorsWrapSentinels walks the public calls' error paths — bad
// input, a missing capability, a closed turnstile.Client, a lease no longer held, a
// store that is down, a cancelled wait — and checks that each error keeps
// the promise of errors.go, so that callers can branch with errors.Is.
func TestErrorsWrapSentinels(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	mem := func(t *testing.T) *turnstile.Client {
		c, err := turnstile.New(memory.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	failing := func(t *testing.T) *turnstile.Client {
		c, err := turnstile.New(down{}, turnstile.WithBackoff(turnstile.NoRetry()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	held := func(t *testing.T, c *turnstile.Client, key string) *turnstile.Lease {
		l, err := c.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	type call func(t *testing.T) error
	calls := map[string]call{
		"turnstile.New nil backend": func(t *testing.T) error { _, err := turnstile.New(nil); return err },
		"turnstile.New bad TTL": func(t *testing.T) error {
			_, err := turnstile.New(memory.New(), turnstile.WithTTL(time.Nanosecond))
			return err
		},
		"turnstile.New bad option": func(t *testing.T) error {
			_, err := turnstile.New(memory.New(), turnstile.WithClockDrift(-1, 0))
			return err
		},
		"turnstile.Open unknown": func(t *testing.T) error { _, err := turnstile.Open(ctx, "nosuchstore://x"); return err },
		"turnstile.Open bad URL": func(t *testing.T) error { _, err := turnstile.Open(ctx, "::"); return err },
		"nil turnstile.Client":   func(t *testing.T) error { var c *turnstile.Client; _, err := c.Acquire(ctx, "k"); return err },
		"empty key":              func(t *testing.T) error { _, err := mem(t).Acquire(ctx, ""); return err },
		"long key": func(t *testing.T) error {
			_, err := mem(t).TryAcquire(ctx, strings.Repeat("k", turnstile.MaxKeyLen+1))
			return err
		},
		"held": func(t *testing.T) error {
			c := mem(t)
			held(t, c, "k")
			_, err := c.TryAcquire(ctx, "k", turnstile.WithOwner("other"))
			return err
		},
		"wait cancelled": func(t *testing.T) error {
			c := mem(t)
			held(t, c, "k")
			_, err := c.Acquire(cancelled, "k", turnstile.WithOwner("other"))
			return err
		},
		"wait timed out": func(t *testing.T) error {
			c := mem(t)
			held(t, c, "k")
			wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			_, err := c.Acquire(wctx, "k", turnstile.WithOwner("other"))
			return err
		},
		"closed turnstile.Client": func(t *testing.T) error {
			c := mem(t)
			_ = c.Close()
			_, err := c.Acquire(ctx, "k")
			return err
		},
		"release twice": func(t *testing.T) error {
			l := held(t, mem(t), "k")
			_ = l.Release(ctx)
			return l.Release(ctx)
		},
		"extend released": func(t *testing.T) error {
			l := held(t, mem(t), "k")
			_ = l.Release(ctx)
			return l.Extend(ctx, time.Second)
		},
		"extend bad TTL": func(t *testing.T) error { return held(t, mem(t), "k").Extend(ctx, time.Nanosecond) },
		"store down: acquire": func(t *testing.T) error {
			_, err := failing(t).TryAcquire(ctx, "k")
			return err
		},
		"store down: wait": func(t *testing.T) error {
			_, err := failing(t).Acquire(ctx, "k")
			return err
		},
		"store down: inspect": func(t *testing.T) error { _, err := failing(t).Inspect(ctx, "k"); return err },
		"store down: list":    func(t *testing.T) error { _, _, err := failing(t).List(ctx, "", 10); return err },
		"store down: force release": func(t *testing.T) error {
			_, err := failing(t).ForceRelease(ctx, "k")
			return err
		},
		"store down: turnstile.Do": func(t *testing.T) error {
			return turnstile.Do(ctx, failing(t), "k", func(context.Context, *turnstile.Lease) error { return nil })
		},
		"store down: turnstile.DoAll": func(t *testing.T) error {
			return turnstile.DoAll(ctx, failing(t), []string{"a", "b"}, func(context.Context, *turnstile.MultiLease) error { return nil })
		},
		"inspect unsupported": func(t *testing.T) error {
			c := newClient(t, noCaps{memory.New()})
			_, err := c.Inspect(ctx, "k")
			return err
		},
		"AcquireAll no keys": func(t *testing.T) error { _, err := mem(t).AcquireAll(ctx, nil); return err },
		"AcquireAll held": func(t *testing.T) error {
			c := mem(t)
			held(t, c, "b")
			_, err := c.AcquireAll(ctx, []string{"a", "b"}, turnstile.WithOwner("other"), turnstile.WithBackoff(turnstile.NoRetry()))
			return err
		},
		"Election empty name": func(t *testing.T) error { _, err := mem(t).Election(""); return err },
		"TryCampaign led": func(t *testing.T) error {
			store := memory.New()
			var err error
			for _, value := range []string{"a", "b"} {
				var c *turnstile.Client
				if c, err = turnstile.New(store); err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var e *turnstile.Election
				if e, err = c.Election("e"); err != nil {
					t.Fatal(err)
				}
				_, err = e.TryCampaign(ctx, value)
			}
			return err
		},
		"Leader down": func(t *testing.T) error {
			e, err := failing(t).Election("e")
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Leader(ctx)
			return err
		},
		"turnstile.Semaphore 0":           func(t *testing.T) error { _, err := turnstile.Semaphore(memory.New(), 0); return err },
		"turnstile.Semaphore too many":    func(t *testing.T) error { _, err := turnstile.Semaphore(memory.New(), driver.MaxPermits+1); return err },
		"turnstile.Reentrant unsupported": func(t *testing.T) error { _, err := turnstile.Reentrant(noCaps{memory.New()}); return err },
		"turnstile.Fair unsupported":      func(t *testing.T) error { _, err := turnstile.Fair(noCaps{memory.New()}); return err },
		"turnstile.ReadWrite bad claim": func(t *testing.T) error {
			_, _, err := turnstile.ReadWrite(memory.New(), turnstile.WithWriterClaim(time.Nanosecond))
			return err
		},
	}
	// The check itself tells a bare store error from a wrapped one.
	if wrapsAPromise(errDown) || wrapsAPromise(errors.New("turnstile: something")) {
		t.Fatal("wrapsAPromise takes an error that keeps no promise")
	}
	for name, fn := range calls {
		t.Run(name, func(t *testing.T) {
			err := fn(t)
			if err == nil {
				t.Fatal("no error")
			}
			if !wrapsAPromise(err) {
				t.Fatalf("%T %q wraps no sentinel of errors.go, no context error, and is no *turnstile.LockError around the store's error", err, err)
			}
		})
	}
}
