package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/turnstilelock/turnstile/etcd"
)

// shortTTL is the TTL of the tests' locks: etcd's minimum lease with its
// default election timeout (1 s × 1.5, rounded up to whole seconds).
const shortTTL = 2 * time.Second

// renewing extends owner's lock on key every 300 ms until the test ends
// or stop is closed; it reports the first refusal or error on the
// returned channel (closed when it stops).
func renewing(t *testing.T, b *etcd.Backend, key, owner string) (stop func(), failed <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(errs)
		for ctx.Err() == nil {
			ok, err := b.Extend(ctx, key, owner, shortTTL)
			if ctx.Err() != nil {
				return
			}
			if err != nil || !ok {
				errs <- fmt.Errorf("extend %s = %v, %v", key, ok, err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop, errs
}

// noFailure fails the test if a renewing loop reported a failure.
func noFailure(t *testing.T, what string, failed <-chan error) {
	t.Helper()
	select {
	case err, ok := <-failed:
		if ok {
			t.Fatalf("%s: %v", what, err)
		}
	default:
	}
}

// gone waits until the lock key of key is deleted, at most within, and
// returns how long after since that was seen; it fails the test if the
// key is still there after within.
func gone(t *testing.T, raw *clientv3.Client, key string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	for end := time.Now().Add(within); ; {
		if leaseOf(t, raw, key) == 0 {
			return time.Since(since)
		}
		if time.Now().After(end) {
			t.Fatalf("lock %s still in etcd %v after it was last renewed, while other locks renewed its shared lease", key, time.Since(since))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUnrenewedLockEnds: a lock whose holder stops calling Extend ends
// after its own TTL even though the backend's other locks of the same
// TTL class keep the shared lease renewed — never before that TTL — and
// another owner can take it.
func TestUnrenewedLockEnds(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	other := dial(t, srv)
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := b.Acquire(ctx, "busy", "ob", shortTTL); !ok || err != nil {
		t.Fatalf("acquire busy = %v, %v", ok, err)
	}
	_, failed := renewing(t, b, "busy", "ob")
	start := time.Now()
	if _, ok, err := b.Acquire(ctx, "stale", "os", shortTTL); !ok || err != nil {
		t.Fatalf("acquire stale = %v, %v", ok, err)
	}
	if leaseOf(t, raw, "stale") != leaseOf(t, raw, "busy") {
		t.Fatal("the two locks are not under one shared lease")
	}
	if took := gone(t, raw, "stale", start, 20*time.Second); took < shortTTL {
		t.Fatalf("lock deleted %v after its grant, before its TTL %v", took, shortTTL)
	}
	if _, ok, err := other.Acquire(ctx, "stale", "next", shortTTL); !ok || err != nil {
		t.Fatalf("another owner's acquisition after the lock ended = %v, %v", ok, err)
	}
	noFailure(t, "the renewed lock", failed)
}

// TestFailedExtendBoundsTheLock: an Extend whose outcome is unknown (its
// context ended while the request may have been applied) moves the
// lock's end to that Extend's start plus the TTL at most; the holder,
// which stopped renewing, finds the lock gone after that, though other
// locks renew the shared lease.
func TestFailedExtendBoundsTheLock(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, time.Minute)
	for _, k := range []string{"busy", "stale"} {
		if _, ok, err := b.Acquire(ctx, k, "o-"+k, shortTTL); !ok || err != nil {
			t.Fatalf("acquire %s = %v, %v", k, ok, err)
		}
	}
	_, failed := renewing(t, b, "busy", "o-busy")
	if ok, err := b.Extend(ctx, "stale", "o-stale", shortTTL); !ok || err != nil {
		t.Fatalf("extend = %v, %v", ok, err)
	}
	// A lost reply: the request goes out, its caller stops waiting.
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	_, _ = b.Extend(lctx, "stale", "o-stale", shortTTL)
	cancel()
	gone(t, raw, "stale", start, 20*time.Second)
	if ok, err := b.Extend(ctx, "stale", "o-stale", shortTTL); ok || err != nil {
		t.Fatalf("extend after the lock ended = %v, %v; want false, nil", ok, err)
	}
	noFailure(t, "the renewed lock", failed)
}

// TestCloseWhileSweeping: Close ends the sweeper even while its delete
// waits for a cluster that cannot answer (a stopped server stands for a
// member cut off from the others), without holding the caller for the
// delete's own bound; the lock then ends with its shared lease, which
// nobody renews any more.
func TestCloseWhileSweeping(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srv, b := startOwn(t, ctx)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	start := time.Now()
	if _, ok, err := b.Acquire(ctx, "stale", "os", shortTTL); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	// Past the lock's deadline: the sweeper's delete is waiting.
	time.Sleep(time.Until(start.Add(shortTTL + 500*time.Millisecond)))
	closing := time.Now()
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if took := time.Since(closing); took > 3*time.Second {
		t.Errorf("Close waited %v for a sweep the server could not answer", took)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	gone(t, raw, "stale", start, 20*time.Second)
}
