package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// calls counts the gRPC calls of method the server has begun.
func calls(t *testing.T, srv *testserver.Etcd, method string) int {
	t.Helper()
	n, err := srv.GRPCCalls(method)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// leaseOf is the lease the lock key of key is under, 0 when it is gone.
func leaseOf(t *testing.T, raw *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	r, err := raw.Get(ctxFor(t, 5*time.Second), lockKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(r.Kvs[0].Lease)
}

// TestLocksShareALease: a backend's locks of one TTL class are under one
// lease, granted once and never revoked by a release, so that a pair of
// Acquire and Release costs etcd's log two writes — the lock key's put
// and its delete — as etcd's own concurrency.Mutex does with a session.
// An uncontended AcquireWait takes the lock without queueing: no waiter
// key, no read of the queue.
func TestLocksShareALease(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	// The first acquisition grants the lease.
	if _, ok, err := b.Acquire(ctx, "first", "o", 5*time.Second); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	shared := leaseOf(t, raw, "first")
	grants, revokes, puts, ranges := calls(t, srv, "LeaseGrant"), calls(t, srv, "LeaseRevoke"), calls(t, srv, "Put"), calls(t, srv, "Range")
	const pairs = 20
	for i := range pairs {
		key, owner := fmt.Sprint("k", i), fmt.Sprint("o", i)
		if i%2 == 0 {
			if _, ok, err := b.Acquire(ctx, key, owner, 5*time.Second); !ok || err != nil {
				t.Fatalf("acquire %s = %v, %v", key, ok, err)
			}
		} else if _, err := b.AcquireWait(ctx, key, owner, 5*time.Second); err != nil {
			t.Fatalf("acquire (wait) %s = %v", key, err)
		}
		if got := leaseOf(t, raw, key); got != shared {
			t.Fatalf("lock %s is under lease %x, want the shared %x", key, got, shared)
		}
		if ok, err := b.Extend(ctx, key, owner, 5*time.Second); !ok || err != nil {
			t.Fatalf("extend %s = %v, %v", key, ok, err)
		}
		if ok, err := b.Release(ctx, key, owner); !ok || err != nil {
			t.Fatalf("release %s = %v, %v", key, ok, err)
		}
		if got := leaseOf(t, raw, key); got != 0 {
			t.Fatalf("lock %s still there after its release", key)
		}
	}
	if n := calls(t, srv, "LeaseGrant") - grants; n != 0 {
		t.Errorf("%d pairs granted %d leases, want none (the shared lease)", pairs, n)
	}
	if n := calls(t, srv, "LeaseRevoke") - revokes; n != 0 {
		t.Errorf("%d pairs revoked %d leases, want none", pairs, n)
	}
	if n := calls(t, srv, "Put") - puts; n != 0 {
		t.Errorf("%d uncontended pairs made %d Puts (waiter keys), want none", pairs, n)
	}
	// The test's own leaseOf reads are Range calls: one after each
	// acquisition and one after each release.
	if n := calls(t, srv, "Range") - ranges; n != 2*pairs {
		t.Errorf("%d uncontended pairs made %d Range calls besides the test's %d, want none", pairs, n-2*pairs, 2*pairs)
	}
	if _, err := raw.TimeToLive(ctx, shared); err != nil {
		t.Fatalf("shared lease: %v", err)
	}
}

// TestAcquireRenewsTheSharedLease: a lock taken on a lease granted
// earlier must still live its whole TTL from the call: the acquisition
// renews the lease.
func TestAcquireRenewsTheSharedLease(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, time.Minute)
	const ttl = 6 * time.Second
	if _, ok, err := b.Acquire(ctx, "early", "o1", ttl); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	time.Sleep(4 * time.Second)
	start := time.Now()
	for _, acquire := range []func(key, owner string) error{
		func(key, owner string) error {
			_, ok, err := b.Acquire(ctx, key, owner, ttl)
			if !ok && err == nil {
				err = errors.New("not acquired")
			}
			return err
		},
		func(key, owner string) error { _, err := b.AcquireWait(ctx, key, owner, ttl); return err },
	} {
		if err := acquire("late", "o2"); err != nil {
			t.Fatal(err)
		}
		left, err := raw.TimeToLive(ctx, leaseOf(t, raw, "late"))
		if err != nil {
			t.Fatal(err)
		}
		// Without a renewal the lease had about 2 s left; renewed by the
		// acquisition, its TTL runs from it: at least ttl minus the time
		// since the call began (rounded down to whole seconds).
		if min := int64((ttl - time.Since(start)) / time.Second); left.TTL < min {
			t.Fatalf("lock's lease has %d s left after an acquisition %v ago with TTL %v, want at least %d", left.TTL, time.Since(start), ttl, min)
		}
		if ok, err := b.Release(ctx, "late", "o2"); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		start = time.Now()
	}
}

// TestLostSharedLease: when the shared lease ends on the server while
// the backend thinks it alive (here revoked behind its back, as an
// expiry would), exactly the locks on it are lost — each holder's Extend
// says so — and the next acquisition takes a new lease, with a larger
// token.
func TestLostSharedLease(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	other := dial(t, srv) // another backend, as another process
	ctx := ctxFor(t, 30*time.Second)
	t1, ok, err := b.Acquire(ctx, "a", "o1", 5*time.Second)
	if !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	if _, ok, err := other.Acquire(ctx, "x", "ox", 5*time.Second); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	if _, err := raw.Revoke(ctx, leaseOf(t, raw, "a")); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Extend(ctx, "a", "o1", 5*time.Second); ok || err != nil {
		t.Fatalf("extend of a lock whose lease ended = %v, %v; want false, nil", ok, err)
	}
	t2, ok, err := b.Acquire(ctx, "b", "o2", 5*time.Second)
	if !ok || err != nil {
		t.Fatalf("acquire after the lease ended = %v, %v", ok, err)
	}
	if t2 <= t1 {
		t.Fatalf("token %d after %d", t2, t1)
	}
	if _, err := b.AcquireWait(ctx, "c", "o3", 5*time.Second); err != nil {
		t.Fatalf("acquire (wait) after the lease ended = %v", err)
	}
	for _, k := range [][2]string{{"b", "o2"}, {"c", "o3"}} {
		if ok, err := b.Extend(ctx, k[0], k[1], 5*time.Second); !ok || err != nil {
			t.Fatalf("extend %s = %v, %v", k[0], ok, err)
		}
	}
	if ok, err := other.Extend(ctx, "x", "ox", 5*time.Second); !ok || err != nil {
		t.Fatalf("another backend's lock after this one's lease ended: extend = %v, %v", ok, err)
	}
}

// TestReleasesLeaveOtherLocks: a release, a release retried after a lost
// reply, a release of the same owner id through another backend and a
// forced release end one lock each; the backend's other locks on the
// same lease live on.
func TestReleasesLeaveOtherLocks(t *testing.T) {
	srv, b := startBackend(t)
	other := dial(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	for _, k := range []string{"r1", "r2", "r3", "keep"} {
		if _, ok, err := b.Acquire(ctx, k, "o-"+k, 5*time.Second); !ok || err != nil {
			t.Fatalf("acquire %s = %v, %v", k, ok, err)
		}
	}
	if ok, err := b.Release(ctx, "r1", "o-r1"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	if ok, err := b.Release(ctx, "r1", "o-r1"); ok || err != nil {
		t.Fatalf("retried release = %v, %v; want false, nil", ok, err)
	}
	if ok, err := other.Release(ctx, "r2", "o-r2"); !ok || err != nil {
		t.Fatalf("release through another backend = %v, %v", ok, err)
	}
	if _, err := other.ForceRelease(ctx, "r3"); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if ok, err := b.Extend(ctx, "r3", "o-r3", 5*time.Second); ok || err != nil {
		t.Fatalf("extend after a forced release = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.Extend(ctx, "keep", "o-keep", 5*time.Second); !ok || err != nil {
		t.Fatalf("extend of the lock nobody released = %v, %v", ok, err)
	}
}

// TestFastPathKeepsTheQueue: AcquireWait takes a free lock at once only
// when nobody waits for it; a waiter queued (here one of another process
// about to take the free lock) goes first.
func TestFastPathKeepsTheQueue(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	const k = "queued"
	lease, err := raw.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, queueDir(k)+"earlier", "earlier", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := b.AcquireWait(wctx, k, "late", 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireWait behind a queued waiter = %v, want it to wait (context.DeadlineExceeded)", err)
	}
	if got := leaseOf(t, raw, k); got != 0 {
		t.Fatal("the lock was taken ahead of the queued waiter")
	}
	waitQueued(t, raw, k, 1)
	done := make(chan error, 1)
	go func() { _, err := b.AcquireWait(ctx, k, "next", 5*time.Second); done <- err }()
	waitQueued(t, raw, k, 2)
	if _, err := raw.Delete(ctx, queueDir(k)+"earlier"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AcquireWait once the queue emptied = %v", err)
	}
	waitQueued(t, raw, k, 0)
}
