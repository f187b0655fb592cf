package locktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The cases of the lock kinds beside the plain lock — reentrant,
// read-write, semaphore, fair — each run by a Run function of its own,
// since a store offers the kinds it can.

// envView names the registered view a child process applies.
const envView = "TURNSTILE_LOCKTEST_VIEW"

var (
	viewsMu sync.Mutex
	views   = map[string]func(driver.Backend) (driver.Backend, error){}
)

// RegisterView names a function that turns a backend opened from a
// Harness URL into the lock kind under test, for the child processes of
// the multi-process cases (Harness.View). Register it before TestMain
// calls RunChild, from an init function of the test package:
//
//	func init() {
//		locktest.RegisterView("redis-fair", func(b driver.Backend) (driver.Backend, error) {
//			return turnstile.Fair(b, turnstile.WithPollInterval(20*time.Millisecond))
//		})
//	}
func RegisterView(name string, view func(driver.Backend) (driver.Backend, error)) {
	viewsMu.Lock()
	defer viewsMu.Unlock()
	views[name] = view
}

// viewClient returns a Client over the view name of c's backend.
func viewClient(c *turnstile.Client, name string, opts []turnstile.Option) (*turnstile.Client, error) {
	viewsMu.Lock()
	view, ok := views[name]
	viewsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("locktest: no view %q registered (RegisterView)", name)
	}
	b, err := view(c.Backend())
	if err != nil {
		return nil, fmt.Errorf("locktest: view %q: %w", name, err)
	}
	return turnstile.New(b, opts...)
}

// Child roles of the kinds' cases.
const roleQueue = "queue"

// kindRoles are the child roles beside runChild's own.
var kindRoles = map[string]func(ctx context.Context, c *turnstile.Client, key string) error{
	// queue waits for key, says so with its token, and releases it.
	roleQueue: func(ctx context.Context, c *turnstile.Client, key string) error {
		l, err := c.Acquire(ctx, key)
		if err != nil {
			return err
		}
		fmt.Printf("HELD %d\n", l.Token())
		time.Sleep(10 * time.Millisecond) // the next in line must wait for this release
		return l.Release(ctx)
	},
}

// checkIncreasing fails t unless tokens strictly increase.
func checkIncreasing(t *testing.T, what string, tokens []uint64) {
	t.Helper()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("%s %d got token %d, not greater than %d before it", what, i, tokens[i], tokens[i-1])
		}
	}
}

// checkTokensIncrease acquires and releases k n times in a row, the
// i-th time with the Client by(i), and fails t unless the tokens strictly
// increase.
func checkTokensIncrease(t *testing.T, ctx context.Context, k string, n int, by func(i int) *turnstile.Client) {
	t.Helper()
	tokens := make([]uint64, 0, n)
	for i := range n {
		l, err := by(i).TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		tokens = append(tokens, l.Token())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkIncreasing(t, "acquisition", tokens)
}

// kindClient returns a Client over b, closed when the case ends.
func kindClient(t *testing.T, b driver.Backend, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	c, err := turnstile.New(b, opts...)
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// View returns a function that fails t on a kind function's error and
// returns the view as the store's own type T, for tests that use what T
// adds to a driver.Backend:
//
//	sem := locktest.View[*redis.Semaphore](t)(turnstile.Semaphore(b, 3))
func View[T any](t testing.TB) func(driver.Backend, error) T {
	return func(b driver.Backend, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		v, ok := b.(T)
		if !ok {
			t.Fatalf("locktest: the view is a %T, not a %T", b, v)
		}
		return v
	}
}

// Sides is View for the two sides turnstile.ReadWrite returns.
func Sides[R, W any](t testing.TB) func(driver.Backend, driver.Backend, error) (R, W) {
	return func(read, write driver.Backend, err error) (R, W) {
		t.Helper()
		return View[R](t)(read, err), View[W](t)(write, nil)
	}
}
