package etcd_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// The backend renews every lease on one stream (renew.go). These tests
// check what that stream must not change: renewals answered to the
// right caller, a new stream after etcd restarts, a caller's deadline
// kept while etcd cannot answer, and an answer after Close.

// TestRenewConcurrently: many renewals of several leases at once, each
// answered — a renewal of a lease that is gone as lost.
func TestRenewConcurrently(t *testing.T) {
	_, b := startBackend(t)
	ctx := ctxFor(t, time.Minute)
	const locks = 8
	for i := range locks {
		if _, ok, err := b.Acquire(ctx, key(i), "owner", 30*time.Second); err != nil || !ok {
			t.Fatalf("Acquire %d: ok=%v err=%v", i, ok, err)
		}
	}
	// One lock released: its renewals must say so, the others' not.
	if ok, err := b.Release(ctx, key(0), "owner"); err != nil || !ok {
		t.Fatalf("Release: ok=%v err=%v", ok, err)
	}
	var wg sync.WaitGroup
	for i := range locks {
		for range 20 {
			wg.Go(func() {
				ok, err := b.Extend(ctx, key(i), "owner", 30*time.Second)
				if err != nil || ok != (i != 0) {
					t.Errorf("Extend %s: ok=%v err=%v, want ok=%v", key(i), ok, err, i != 0)
				}
			})
		}
	}
	wg.Wait()
}

func key(i int) string { return "renew-" + string(rune('a'+i)) }

// TestRenewAfterRestart: a renewal after etcd restarted, which ended the
// stream renewals are sent on, goes out on a new one.
func TestRenewAfterRestart(t *testing.T) {
	srv, b := startBackend(t)
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := b.Acquire(ctx, "restart-key", "owner", 30*time.Second); err != nil || !ok {
		t.Fatalf("Acquire: ok=%v err=%v", ok, err)
	}
	if ok, err := b.Extend(ctx, "restart-key", "owner", 30*time.Second); err != nil || !ok {
		t.Fatalf("Extend before the restart: ok=%v err=%v", ok, err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Extend(ctx, "restart-key", "owner", 30*time.Second); err != nil || !ok {
		t.Fatalf("Extend after the restart: ok=%v err=%v", ok, err)
	}
}

// TestRenewKeepsTheCallersDeadline: while etcd cannot answer, a renewal
// returns when its context ends.
func TestRenewKeepsTheCallersDeadline(t *testing.T) {
	srv, b := startBackend(t)
	ctx := ctxFor(t, time.Minute)
	lease := grant(t, ctx, b)
	if _, err := b.RenewLease(ctx, lease); err != nil { // the stream is open
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.RenewLease(rctx, lease)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("renewing while etcd is stopped = %v, want the context's deadline", err)
	}
	// The caller waits for its own 200 ms, and a descheduled goroutine's
	// slack.
	if took > 3*time.Second {
		t.Errorf("renewing with a 200ms context took %v while etcd was stopped", took)
	}
}

// TestRenewAfterClose: a renewal after Close fails at once.
func TestRenewAfterClose(t *testing.T) {
	_, b := startBackend(t)
	ctx := ctxFor(t, time.Minute)
	lease := grant(t, ctx, b)
	if _, err := b.RenewLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RenewLease(ctx, lease); err == nil {
		t.Fatal("a renewal after Close succeeded")
	}
}
