package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// A waiter opens its watch where the store is then, not at the revision
// it looked at (etcd would catch such a watch up only every 100 ms), so
// it must find a release that came between its look and its watch by
// itself. These tests release in that moment and write another key, so
// that the watch opens past the release: a waiter that missed it would
// wait until its context ends, as nothing is deleted after.

// releasePast releases a's lock on k and writes another key, so that a
// watch opened after it starts past the release.
func releasePast(ctx context.Context, t *testing.T, holder *etcd.Backend, raw *clientv3.Client, k string) {
	t.Helper()
	if ok, err := holder.Release(ctx, k, "a"); err != nil || !ok {
		t.Errorf("Release a: ok=%v err=%v", ok, err)
	}
	if _, err := raw.Put(ctx, "/elsewhere", "x"); err != nil {
		t.Error(err)
	}
}

// TestWaiterSeesAReleaseBeforeItsWatch: the lock is released between a
// waiter's failed take and its watch of the lock key.
func TestWaiterSeesAReleaseBeforeItsWatch(t *testing.T) {
	srv := testserver.StartEtcd(t)
	holder, waiter, raw := dial(t, srv), dial(t, srv), rawClient(t, srv)
	ctx := ctxFor(t, time.Minute)
	const k = "between-take-and-watch"
	if _, ok, err := holder.Acquire(ctx, k, "a", 30*time.Second); err != nil || !ok {
		t.Fatalf("Acquire a: ok=%v err=%v", ok, err)
	}
	fired := 0
	waiter.BeforeWatch(func() {
		fired++
		if fired > 1 {
			return
		}
		releasePast(ctx, t, holder, raw, k)
	})
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := waiter.AcquireWait(wctx, k, "b", 30*time.Second); err != nil {
		t.Fatalf("the waiter missed the release before its watch: %v", err)
	}
	if fired == 0 {
		t.Fatal("the waiter never watched: the lock was free when it looked")
	}
}

// TestWaiterSeesItsPredecessorLeaveBeforeItsWatch: the waiter ahead
// leaves the queue (and the lock is released) between a waiter's read of
// the queue and its watch of that predecessor.
func TestWaiterSeesItsPredecessorLeaveBeforeItsWatch(t *testing.T) {
	srv := testserver.StartEtcd(t)
	holder, ahead, behind, raw := dial(t, srv), dial(t, srv), dial(t, srv), rawClient(t, srv)
	ctx := ctxFor(t, time.Minute)
	const k = "between-read-and-watch"
	if _, ok, err := holder.Acquire(ctx, k, "a", 30*time.Second); err != nil || !ok {
		t.Fatalf("Acquire a: ok=%v err=%v", ok, err)
	}
	actx, leave := context.WithCancel(ctx)
	aheadDone := make(chan error, 1)
	go func() {
		_, err := ahead.AcquireWait(actx, k, "c", 30*time.Second)
		aheadDone <- err
	}()
	waitQueued(t, raw, k, 1)

	fired := 0
	behind.BeforeWatch(func() {
		fired++
		if fired > 1 {
			return
		}
		leave()
		if err := <-aheadDone; !errors.Is(err, context.Canceled) {
			t.Errorf("the waiter ahead: %v, want it to have left", err)
		}
		waitQueued(t, raw, k, 1) // only the one behind
		releasePast(ctx, t, holder, raw, k)
	})
	bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := behind.AcquireWait(bctx, k, "b", 30*time.Second); err != nil {
		t.Fatalf("the waiter missed its predecessor leaving before its watch: %v", err)
	}
	if fired != 1 {
		t.Fatalf("the waiter watched %d times, want once (its predecessor, then a free lock)", fired)
	}
	r, err := raw.Get(ctx, lockKey(k))
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "b" {
		t.Fatalf("lock key after the grant: %v %v", r, err)
	}
}
