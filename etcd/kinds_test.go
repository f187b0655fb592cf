package etcd_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestKinds runs the conformance cases of the reentrant, read-write and
// semaphore views on one server, each taken through the turnstile
// function a user calls. The fair lock's cases run in TestFair: the
// plain Backend is its own fair view.
func TestKinds(t *testing.T) {
	srv := testserver.StartEtcd(t)
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				r, err := turnstile.Reentrant(dial(t, srv))
				if err != nil {
					t.Fatal(err)
				}
				return r
			},
			TTL: 2 * time.Second,
		})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			r, w, err := turnstile.ReadWrite(dial(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			return r, w
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				s, err := turnstile.Semaphore(dial(t, srv), 3)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			// etcd leases count whole seconds, at least 2 s.
			TTL:   2 * time.Second,
			Plain: func(t testing.TB) driver.Backend { return dial(t, srv) },
		}, 3)
	})
	t.Run("FairIsTheBackend", func(t *testing.T) {
		b := dial(t, srv)
		f, err := turnstile.Fair(b)
		if err != nil || f != driver.Backend(b) {
			t.Fatalf("turnstile.Fair(etcd) = %v, %v; want the Backend itself", f, err)
		}
	})
}

// TestKindsPermitsStored: the number of permits is stored with the
// holders, so a view with another number is refused while a permit is
// held, and holds once none is.
func TestKindsPermitsStored(t *testing.T) {
	_, b := startBackend(t)
	ctx := ctxFor(t, 30*time.Second)
	three := locktest.View[*etcd.Semaphore](t)(turnstile.Semaphore(b, 3))
	two := locktest.View[*etcd.Semaphore](t)(turnstile.Semaphore(b, 2))
	const key = "kinds-permits"
	if _, ok, err := three.Acquire(ctx, key, "a", 5*time.Second); err != nil || !ok {
		t.Fatalf("permit of 3: %v, %v", ok, err)
	}
	_, ok, err := two.Acquire(ctx, key, "b", 5*time.Second)
	if !errors.Is(err, turnstile.ErrInvalidOption) || ok {
		t.Fatalf("permit of 2 while one of 3 is held = %v, %v; want ErrInvalidOption", ok, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "with 3 permits") || !strings.Contains(msg, "has 2") {
		t.Fatalf("error %q does not name both numbers", msg)
	}
	if _, err := two.AcquireWait(ctx, key, "b", 5*time.Second); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("queued permit of 2 while one of 3 is held: %v, want ErrInvalidOption", err)
	}
	if ok, err := three.Release(ctx, key, "a"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	for _, o := range []string{"b", "c"} {
		if _, ok, err := two.Acquire(ctx, key, o, 5*time.Second); err != nil || !ok {
			t.Fatalf("permit of 2 once none is held: %v, %v", ok, err)
		}
	}
	if _, ok, err := two.Acquire(ctx, key, "d", 5*time.Second); err != nil || ok {
		t.Fatalf("third permit of 2 = %v, %v; want refused", ok, err)
	}
	for _, n := range []int{0, -1, driver.MaxPermits + 1} {
		if _, err := turnstile.Semaphore(b, n); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("Semaphore(%d): %v, want ErrInvalidOption", n, err)
		}
	}
}

// TestKindsTokensShareOneFence: tokens are etcd revisions, so the kinds
// on one name issue increasing tokens among themselves and with the
// plain lock.
func TestKindsTokensShareOneFence(t *testing.T) {
	_, b := startBackend(t)
	ctx := ctxFor(t, 30*time.Second)
	sem := locktest.View[*etcd.Semaphore](t)(turnstile.Semaphore(b, 2))
	read, write := locktest.Sides[*etcd.ReadLock, *etcd.WriteLock](t)(turnstile.ReadWrite(b))
	views := []driver.Backend{b, locktest.View[*etcd.Reentrant](t)(turnstile.Reentrant(b)), sem, read, write}
	const key = "kinds-fence"
	var last uint64
	for round := range 3 {
		for i, v := range views {
			tok, ok, err := v.Acquire(ctx, key, "owner", 3*time.Second)
			if err != nil || !ok {
				t.Fatalf("round %d, view %d: %v, %v", round, i, ok, err)
			}
			if tok <= last {
				t.Fatalf("round %d, view %d: token %d is not above %d", round, i, tok, last)
			}
			last = tok
			if ok, err := v.Release(ctx, key, "owner"); err != nil || !ok {
				t.Fatalf("round %d, view %d: release %v, %v", round, i, ok, err)
			}
		}
	}
}
