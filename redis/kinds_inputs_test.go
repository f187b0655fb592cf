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

// TestKindOptions: settings outside their range are refused at once.
func TestKindOptions(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := dial(t, srv)
	for _, n := range []int{-1, 0, redis.MaxPermits + 1} {
		if _, err := b.Semaphore(n); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Semaphore(%d) = %v, want ErrInvalidOption", n, err)
		}
	}
	if s, err := b.Semaphore(redis.MaxPermits); err != nil || s.Permits() != redis.MaxPermits {
		t.Errorf("Semaphore(%d) = %v", redis.MaxPermits, err)
	}
	for name, o := range map[string]redis.RWOption{
		"nil": nil, "short claim": redis.WithWriterClaim(time.Millisecond), "long claim": redis.WithWriterClaim(2 * time.Hour),
	} {
		if _, err := b.ReadWrite(o); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("ReadWrite(%s) = %v, want ErrInvalidOption", name, err)
		}
	}
	for name, o := range map[string]redis.FairOption{
		"nil":           nil,
		"short timeout": redis.WithWaiterTimeout(time.Millisecond),
		"long timeout":  redis.WithWaiterTimeout(2 * time.Hour),
		"zero poll":     redis.WithPollInterval(0),
		"long poll":     redis.WithPollInterval(time.Hour),
	} {
		if _, err := b.Fair(o); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Fair(%s) = %v, want ErrInvalidOption", name, err)
		}
	}
}

// TestKindInputs: every kind refuses an empty key or owner and a TTL
// under a millisecond before any round trip.
func TestKindInputs(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, time.Minute)
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
	f, err := dial(t, srv).Fair()
	if err != nil {
		t.Fatal(err)
	}
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
	rw, err := b.ReadWrite()
	if err != nil {
		t.Fatal(err)
	}
	sem, err := b.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	fair, err := b.Fair()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]driver.Backend{
		"reentrant": b.Reentrant(), "read": rw.Read(), "write": rw.Write(), "semaphore": sem, "fair": fair,
	}
}
