// Package locktest is the conformance suite every turnstile backend runs,
// in the way testing/fstest serves file systems:
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, locktest.Harness{New: ..., URL: ..., Evict: ...})
//	}
//
// Backends whose store is shared between processes also call RunChild at
// the start of TestMain, because the multi-process cases re-run the test
// binary as lock-holding child processes:
//
//	func TestMain(m *testing.M) {
//		locktest.RunChild()
//		goleak.VerifyTestMain(m)
//	}
package locktest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Harness tells the suite how to reach the store under test.
type Harness struct {
	// New returns a backend connected to the store under test. The suite
	// calls it several times to stand for several instances; it closes
	// backends that implement io.Closer at the end of each case.
	New func(t testing.TB) driver.Backend

	// URL opens the same store with turnstile.Open from another process.
	// Empty means the store is single-process (the memory backend) and the
	// cases that need several OS processes do not apply; the crash case
	// then abandons a lock in-process instead of killing a process.
	URL string

	// Evict removes key from the store behind its holder's back, as an
	// operator, an eviction policy or a failover would.
	Evict func(t testing.TB, key string)

	// TTL is the short lease TTL the timing cases use. Default 300 ms; a
	// store whose expiry is coarser sets more.
	TTL time.Duration

	// View names a function registered with RegisterView that child
	// processes apply to the backend they open from URL, so that they
	// use the same lock kind as New (the redis package's fair view, for
	// example). Empty: children use the opened backend as it is.
	View string

	// Waiting reports how many entries key's queue holds in the store,
	// for RunFair: it must grow by one when a waiter joins. Whether the
	// holder counts does not matter.
	Waiting func(t testing.TB, key string) int

	// Plain, for RunFair, returns the plain lock on the same keys as the
	// queue New returns (the redis package's Backend beside its Fair
	// view). The retry-first case then retries on it and queues in New's
	// queue. Nil: New's backend does both. RunSemaphore needs it: its
	// stored-count case takes semaphore views of it with 2 and 3 permits.
	Plain func(t testing.TB) driver.Backend
}

func (h *Harness) ttl() time.Duration {
	if h.TTL > 0 {
		return h.TTL
	}
	return 300 * time.Millisecond
}

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("locktest: Harness.New is nil")
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *Harness)
	}{
		{"MutualExclusionGoroutines", testMutualExclusionGoroutines},
		{"MutualExclusionProcesses", testMutualExclusionProcesses},
		{"CrashedHolderExpires", testCrashedHolderExpires},
		{"NonOwnerRefused", testNonOwnerRefused},
		{"SameOwnerRetryIsIdempotent", testSameOwnerRetry},
		{"TokensIncrease", testTokensIncrease},
		{"TokensIncreaseConcurrent", testTokensIncreaseConcurrent},
		{"TokensIncreaseInOneClient", testTokensIncreaseInOneClient},
		{"AcquireHonoursCancel", testAcquireHonoursCancel},
		{"TryAcquireFailsFast", testTryAcquireFailsFast},
		{"WatchdogKeepsLeaseAlive", testWatchdogKeepsAlive},
		{"LostBehindItsBack", testLostBehindItsBack},
		{"ExpiryWithoutWatchdog", testExpiryWithoutWatchdog},
		{"ReleaseFreesAtOnce", testReleaseFreesAtOnce},
		{"ExtendMovesDeadline", testExtendMovesDeadline},
		{"DoReleasesAndReportsLoss", testDo},
		{"DistinctKeysDoNotContend", testDistinctKeys},
		{"MultiKeyAllOrNothing", testMultiKey},
		{"UseAfterClose", testUseAfterClose},
		{"Inspect", testInspect},
		{"ForceReleaseEndsLiveLease", testForceReleaseEndsLiveLease},
		{"Election", testElection},
		{"LockDelay", testLockDelay},
	}
	for _, c := range cases {
		if c.name == "MutualExclusionProcesses" && h.URL == "" {
			continue // single-process store: nothing to share between processes
		}
		t.Run(c.name, func(t *testing.T) { c.fn(t, &h) })
	}
}

// backend returns a fresh backend that is closed when the case ends.
func (h *Harness) backend(t *testing.T) driver.Backend {
	t.Helper()
	b := h.New(t)
	if b == nil {
		t.Fatal("locktest: Harness.New returned nil")
	}
	if c, ok := b.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return b
}

// client returns a Client over a fresh backend, closed when the case ends.
func (h *Harness) client(t *testing.T, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	c, err := turnstile.New(h.backend(t), opts...)
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// key returns a key no other case or run uses.
func key(t *testing.T) string {
	return "locktest:" + t.Name() + ":" + time.Now().Format("150405.000000000")
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
