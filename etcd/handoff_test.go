package etcd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestReleaseHandsOver: a release gives the lock to the backend's first
// waiter in the same write: the lock key is never deleted in between (it
// keeps the first holder's create revision), and the waiter's token is
// that write's revision, above the holder's.
func TestReleaseHandsOver(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	const k = "handoff"
	first, ok, err := b.Acquire(ctx, k, "holder", 5*time.Second)
	if !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	type grant struct {
		tok uint64
		err error
	}
	got := make(chan grant, 1)
	go func() {
		tok, err := b.AcquireWait(ctx, k, "next", 5*time.Second)
		got <- grant{tok, err}
	}()
	waitQueued(t, raw, k, 1)
	waitLocal(t, b, k, 1) // its waiter key is written before it joins the backend's line
	if ok, err := b.Release(ctx, k, "holder"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	g := <-got
	if g.err != nil {
		t.Fatalf("AcquireWait = %v", g.err)
	}
	r, err := raw.Get(ctx, lockKey(k))
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("lock key: %v %v", r, err)
	}
	kv := r.Kvs[0]
	if string(kv.Value) != "next" || uint64(kv.CreateRevision) != first || uint64(kv.ModRevision) != g.tok || g.tok <= first {
		t.Fatalf("lock key %q created at %d, modified at %d; want next's, handed over at its token %d > %d without a delete", kv.Value, kv.CreateRevision, kv.ModRevision, g.tok, first)
	}
	waitQueued(t, raw, k, 0)
	if ok, err := b.Extend(ctx, k, "next", 5*time.Second); !ok || err != nil {
		t.Fatalf("extend after the handoff = %v, %v", ok, err)
	}
	if ok, err := b.Release(ctx, k, "next"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
}

// waitLocal waits until n of b's own waiters are in key's line.
func waitLocal(t *testing.T, b *etcd.Backend, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.LocalWaiters(key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d local waiters for %q, want %d", b.LocalWaiters(key), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandoffKeepsArrivalOrder: waiters of two backends (two processes)
// alternate in one queue; a release hands the lock to its own backend's
// waiter only when that waiter is first, so the lock passes in arrival
// order.
func TestHandoffKeepsArrivalOrder(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	bs := []*etcd.Backend{dial(t, srv), dial(t, srv)}
	ctx := ctxFor(t, 30*time.Second)
	const k = "order"
	if _, ok, err := bs[0].Acquire(ctx, k, "holder", 5*time.Second); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	names := []string{"w0", "w1", "w2", "w3", "w4", "w5"}
	for i, name := range names {
		b := bs[(i+1)%2] // w0 on the other backend, w1 on the holder's, ...
		wg.Go(func() {
			if _, err := b.AcquireWait(ctx, k, name, 5*time.Second); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if ok, err := b.Release(ctx, k, name); !ok || err != nil {
				t.Errorf("%s release = %v, %v", name, ok, err)
			}
		})
		waitQueued(t, raw, k, i+1)
	}
	if ok, err := bs[0].Release(ctx, k, "holder"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	wg.Wait()
	if got := strings.Join(order, ","); got != strings.Join(names, ",") {
		t.Fatalf("lock passed in order %s, want %s", got, strings.Join(names, ","))
	}
}

// TestHandoffToAWaiterWhoseLeaseEnded: the first waiter's lease ended
// (its waiter key with it); the release is a plain one, and the waiter
// is told its lease ended instead of waiting on.
func TestHandoffToAWaiterWhoseLeaseEnded(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	const k = "waiterlost"
	if _, ok, err := b.Acquire(ctx, k, "holder", 5*time.Second); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.AcquireWait(ctx, k, "w", 9*time.Second) // another TTL class: another lease
		done <- err
	}()
	waitQueued(t, raw, k, 1)
	q, err := raw.Get(ctx, queueDir(k), clientv3.WithPrefix())
	if err != nil || len(q.Kvs) != 1 {
		t.Fatalf("queue: %v %v", q, err)
	}
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(q.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Release(ctx, k, "holder"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("AcquireWait succeeded on a lease that ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter whose lease ended still waits")
	}
	if got := leaseOf(t, raw, k); got != 0 {
		t.Fatal("the lock is held after its release and the waiter's failure")
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := b.AcquireWait(wctx, k, "later", 5*time.Second); err != nil {
		t.Fatalf("a later AcquireWait = %v", err)
	}
}

// TestCloseWhileWaiting: closing a backend ends its waiters' waits; what
// they leave in etcd (a waiter key on the backend's shared lease, which
// nothing renews now) is gone within the lease's TTL, so the queue moves
// on for everyone else.
func TestCloseWhileWaiting(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	holder, other := dial(t, srv), dial(t, srv)
	ctx := ctxFor(t, 60*time.Second)
	const k = "closing"
	if _, ok, err := holder.Acquire(ctx, k, "holder", 5*time.Second); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	closing := dial(t, srv)
	done := make(chan error, 1)
	go func() { _, err := closing.AcquireWait(ctx, k, "w", 2*time.Second); done <- err }()
	waitQueued(t, raw, k, 1)
	if err := closing.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("AcquireWait succeeded on a closed backend")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter of a closed backend still waits")
	}
	if ok, err := holder.Release(ctx, k, "holder"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	// The closed backend's waiter key goes with its lease (2 s, renewed
	// by nobody); the next waiter is granted then at the latest.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := other.AcquireWait(wctx, k, "next", 5*time.Second); err != nil {
		t.Fatalf("AcquireWait after the closed backend's waiter = %v", err)
	}
	waitQueued(t, raw, k, 0)
}
