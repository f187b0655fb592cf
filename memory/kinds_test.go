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
			rw, err := store.ReadWrite(500 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			return rw.Read(), rw.Write()
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

// TestKindViewsRefuseBadOptions: a semaphore's number and a writer
// claim out of range match turnstile.ErrInvalidOption.
func TestKindViewsRefuseBadOptions(t *testing.T) {
	b := memory.New()
	for _, n := range []int{-1, 0, memory.MaxPermits + 1} {
		if _, err := b.Semaphore(n); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Semaphore(%d) = %v, want ErrInvalidOption", n, err)
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Hour} {
		if _, err := b.ReadWrite(d); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("ReadWrite(%v) = %v, want ErrInvalidOption", d, err)
		}
	}
}

// TestSemaphoreNumberForgotten: the stored number goes with the last
// permit, whether released or expired, and the refusal names both
// numbers and matches turnstile.ErrInvalidOption.
func TestSemaphoreNumberForgotten(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	two, _ := b.Semaphore(2)
	five, _ := b.Semaphore(5)
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
