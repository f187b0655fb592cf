package zookeeper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper"
)

// orphanSession is long enough that the short partitions below never
// expire the holder's session: its nodes outlive the partition, and only
// the Backend can delete them.
const orphanSession = 15 * time.Second

// dialThroughProxy returns a Backend whose connection goes through a
// proxy of the test's own, with a session long enough to outlive the
// test's partitions.
func dialThroughProxy(t *testing.T, ctx context.Context) (*zookeeper.Backend, *proxy) {
	t.Helper()
	p := startProxy(t, srv.Addr())
	b, err := zookeeper.Dial(ctx, []string{p.Addr()}, zookeeper.WithSessionTimeout(orphanSession))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, p
}

// suspend cuts b's connection through p and waits until b knows it.
func suspend(t *testing.T, ctx context.Context, b *zookeeper.Backend, p *proxy, key, owner string) {
	t.Helper()
	p.partition(true)
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, err := b.Extend(ctx, key, owner, orphanSession); errors.Is(err, zookeeper.ErrSuspended) {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the Backend never noticed the partition")
		}
	}
}

// takenWithin polls until another client takes key, or fails after d.
func takenWithin(t *testing.T, ctx context.Context, key string, d time.Duration) {
	t.Helper()
	other := dial(t)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		_, ok, err := other.Acquire(ctx, key, "next", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Since(start) > d {
			t.Fatalf("%s still held %v after the partition healed: the holder's node was left behind in a live session", key, d)
		}
	}
}

// TestTTLPassesWhileSuspended: a lock whose TTL passes while its link to
// the server is dead cannot be deleted then (the delete is lost with the
// connection); once the session is back (it did not expire) the Backend
// deletes it, and the next contender gets the lock — no node is left
// behind for the session's lifetime.
func TestTTLPassesWhileSuspended(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	b, p := dialThroughProxy(t, ctx)
	const ttl = 200 * time.Millisecond
	if _, ok, err := b.Acquire(ctx, "ttl-suspended", "o", ttl); err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	p.stall(true)
	time.Sleep(3 * ttl) // the TTL passes: the Backend's delete goes out and never arrives
	p.partition(true)   // the connection drops with the delete in flight
	p.stall(false)
	p.partition(false)
	takenWithin(t, ctx, "ttl-suspended", 10*time.Second)
	if ok, err := b.Extend(ctx, "ttl-suspended", "o", orphanSession); ok || err != nil {
		t.Errorf("the old holder's Extend = %v, %v; want false, nil", ok, err)
	}
}

// TestReleaseWhileSuspended: a Release that cannot reach the server says
// so, and the Backend deletes the node as soon as the session is back,
// without waiting for the TTL.
func TestReleaseWhileSuspended(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	b, p := dialThroughProxy(t, ctx)
	for _, owner := range []string{"taken-here", "by-name"} {
		key := "release-suspended-" + owner
		if _, ok, err := b.Acquire(ctx, key, owner, orphanSession); err != nil || !ok {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		if owner == "by-name" {
			// Forget the hold, as a Release after a lost reply does:
			// the Backend must find the owner's nodes by name.
			b.ForgetHold(key, owner)
		}
		suspend(t, ctx, b, p, key, owner)
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := b.Release(rctx, key, owner)
		cancel()
		if err == nil {
			t.Fatal("Release while the connection is down succeeded")
		}
		p.partition(false)
		takenWithin(t, ctx, key, 10*time.Second)
	}
}

// TestDeleteLostInFlight: a Release whose delete is on its way when the
// connection drops fails, and the Backend deletes the node once the
// session is back — the lock is not held for the session's lifetime.
func TestDeleteLostInFlight(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	b, p := dialThroughProxy(t, ctx)
	if _, ok, err := b.Acquire(ctx, "in-flight", "o", orphanSession); err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	p.stall(true) // the delete goes out and never arrives
	released := make(chan error, 1)
	go func() {
		_, err := b.Release(ctx, "in-flight", "o")
		released <- err
	}()
	time.Sleep(300 * time.Millisecond) // the delete is on the wire
	p.partition(true)
	if err := <-released; err == nil {
		t.Fatal("Release whose delete never arrived succeeded")
	}
	p.stall(false)
	p.partition(false)
	takenWithin(t, ctx, "in-flight", 10*time.Second)
}
