package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestKindOptions: a semaphore of the most permits is made with them
// (the kinds' settings are checked by turnstile's functions, the same
// for every store).
func TestKindOptions(t *testing.T) {
	srv := testserver.StartRedis(t)
	if s := semaphoreOf(t, dial(t, srv), driver.MaxPermits); s.Permits() != driver.MaxPermits {
		t.Errorf("a semaphore of %d permits has %d", driver.MaxPermits, s.Permits())
	}
}

// TestKindInputs: every kind refuses an empty key or owner and a TTL
// under a millisecond before any round trip.
func TestKindInputs(t *testing.T) {
	srv, ctx := startRedis(t)
	for name, be := range kindBackends(t, dial(t, srv)) {
		t.Run(name, func(t *testing.T) {
			cases := []struct {
				key, owner string
				ttl        time.Duration
				want       error
			}{
				{"", "o", time.Second, turnstile.ErrInvalidKey},
				{"k", "", time.Second, turnstile.ErrInvalidOption},
				{"k", "o", 0, turnstile.ErrInvalidTTL},
				{"k", "o", time.Microsecond, turnstile.ErrInvalidTTL},
			}
			for _, c := range cases {
				if _, ok, err := be.Acquire(ctx, c.key, c.owner, c.ttl); ok || !errors.Is(err, c.want) {
					t.Errorf("Acquire(%q, %q, %v) = %v, %v; want %v", c.key, c.owner, c.ttl, ok, err, c.want)
				}
				if ok, err := be.Extend(ctx, c.key, c.owner, c.ttl); ok || !errors.Is(err, c.want) {
					t.Errorf("Extend(%q, %q, %v) = %v, %v; want %v", c.key, c.owner, c.ttl, ok, err, c.want)
				}
				if c.want != turnstile.ErrInvalidTTL { // Release takes no TTL
					if ok, err := be.Release(ctx, c.key, c.owner); ok || !errors.Is(err, c.want) {
						t.Errorf("Release(%q, %q) = %v, %v; want %v", c.key, c.owner, ok, err, c.want)
					}
				}
			}
			//lint:ignore SA1012 a nil context must be refused, not dereferenced
			if _, _, err := be.Acquire(nil, "k", "o", time.Second); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("Acquire with a nil context = %v, want ErrInvalidOption", err)
			}
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if _, _, err := be.Acquire(cancelled, "k", "o", time.Second); !errors.Is(err, context.Canceled) {
				t.Errorf("Acquire with a cancelled context = %v, want context.Canceled", err)
			}
			res := be.(driver.BatchExtender).ExtendMany(ctx, []driver.ExtendRequest{{Key: "", Owner: "o", TTL: time.Second}, {Key: "k", Owner: "o", TTL: time.Second}})
			if !errors.Is(res[0].Err, turnstile.ErrInvalidKey) || res[1].Err != nil || res[1].OK {
				t.Errorf("ExtendMany = %+v, want ErrInvalidKey, then not held", res)
			}
		})
	}
	f := fairOf(t, dial(t, srv))
	if _, err := f.AcquireWait(ctx, "k", "", time.Second); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("AcquireWait with an empty owner = %v, want ErrInvalidOption", err)
	}
	if _, err := f.Position(ctx, "", "o"); !errors.Is(err, turnstile.ErrInvalidKey) {
		t.Errorf("Position with an empty key = %v, want ErrInvalidKey", err)
	}
}

// kindBackends returns every lock kind of b.
func kindBackends(t testing.TB, b *redis.Backend) map[string]driver.Backend {
	t.Helper()
	read, write := readWriteOf(t, b)
	return map[string]driver.Backend{
		"reentrant": reentrantOf(t, b), "read": read, "write": write, "semaphore": semaphoreOf(t, b, 2), "fair": fairOf(t, b),
	}
}
