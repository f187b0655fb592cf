package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
)

// TestKinds runs the conformance cases of every lock kind on views of one
// store, taken through turnstile's kind functions.
func TestKinds(t *testing.T) {
	store := memory.New()
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return view(t)(turnstile.Reentrant(store)) },
		})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			r, w, err := turnstile.ReadWrite(store, turnstile.WithWriterClaim(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			return r, w
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New:   func(t testing.TB) driver.Backend { return view(t)(turnstile.Semaphore(store, 3)) },
			Plain: func(testing.TB) driver.Backend { return store },
		}, 3)
	})
	t.Run("Fair", func(t *testing.T) {
		fair := view(t)(turnstile.Fair(store)).(*memory.Fair)
		locktest.RunFair(t, locktest.Harness{
			New:     func(testing.TB) driver.Backend { return fair },
			Waiting: func(_ testing.TB, key string) int { return fair.Waiting(key) },
			Plain:   func(testing.TB) driver.Backend { return store },
		})
	})
}

// view fails t on a kind function's error.
func view(t testing.TB) func(driver.Backend, error) driver.Backend {
	return func(b driver.Backend, err error) driver.Backend {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// TestSemaphoreNumberForgotten: the stored number goes with the last
// permit, whether released or expired, and the refusal names both
// numbers and matches turnstile.ErrInvalidOption.
func TestSemaphoreNumberForgotten(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	two := view(t)(turnstile.Semaphore(b, 2)).(*memory.Semaphore)
	five := view(t)(turnstile.Semaphore(b, 5)).(*memory.Semaphore)
	if _, ok, err := two.Acquire(ctx, "k", "a", 50*time.Millisecond); !ok || err != nil {
		t.Fatalf("permit: %v %v", ok, err)
	}
	_, _, err := five.Acquire(ctx, "k", "b", time.Minute)
	var pe *memory.PermitsError
	if !errors.Is(err, turnstile.ErrInvalidOption) || !errors.As(err, &pe) || pe.Held != 2 || pe.Asked != 5 {
		t.Fatalf("a view with 5 while 2 hold: %v, want a PermitsError of 2 and 5", err)
	}
	if !strings.Contains(err.Error(), "held with 2 permits") || !strings.Contains(err.Error(), "has 5") {
		t.Fatalf("the refusal %q does not name both numbers", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ok, err := five.Acquire(ctx, "k", "b", time.Minute)
		if ok && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the number outlived its expired permit: %v %v", ok, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	st, err := five.Inspect(ctx, "k")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != "b" {
		t.Fatalf("Inspect = %+v, %v; want b's permit alone", st, err)
	}
	if _, err := five.ForceRelease(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := two.Acquire(ctx, "k", "c", time.Minute); !ok || err != nil {
		t.Fatalf("a view with 2 after a forced release: %v %v", ok, err)
	}
}

// TestFairPollInterval: the fair view's first waiter looks again every
// turnstile.WithPollInterval, the only way it learns of a plain lock's
// expiry: with a poll of a minute it is still waiting a second after the
// expiry, with the default it takes the lock.
func TestFairPollInterval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []turnstile.KindOption
		takes bool
	}{
		{"minute", []turnstile.KindOption{turnstile.WithPollInterval(time.Minute)}, false},
		{"default", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memory.New()
			fair := view(t)(turnstile.Fair(store, tc.opts...)).(*memory.Fair)
			if _, ok, err := store.Acquire(context.Background(), "k", "plain", 50*time.Millisecond); !ok || err != nil {
				t.Fatalf("plain acquire: %v %v", ok, err)
			}
			wait := time.Minute
			if !tc.takes {
				wait = time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			_, err := fair.AcquireWait(ctx, "k", "waiter", time.Minute)
			if tc.takes && err != nil {
				t.Fatalf("the waiter did not take the expired lock: %v", err)
			}
			if !tc.takes && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the waiter looked again before its poll interval: %v", err)
			}
		})
	}
}
