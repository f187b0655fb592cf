package zookeeper_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper"
)

// TestKeysAreEscaped: keys with slashes, dots and other bytes ZooKeeper
// does not allow in a node name map to one node each.
func TestKeysAreEscaped(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t)
	for _, key := range []string{"a/b", "a", "..", ".", "/", "ключ", "x\x00y", "a%2Fb", strings.Repeat("k", 512)} {
		if _, ok, err := b.Acquire(ctx, key, "o", time.Minute); err != nil || !ok {
			t.Fatalf("Acquire(%q) = %v, %v", key, ok, err)
		}
	}
	for _, key := range []string{"a/b", "a", "..", ".", "/", "ключ", "x\x00y", "a%2Fb"} {
		if _, ok, err := b.Acquire(ctx, key, "p", time.Minute); ok || err != nil {
			t.Fatalf("Acquire(%q) by another owner = %v, %v; want false, nil", key, ok, err)
		}
	}
}

// TestCloseReleases: closing a Backend ends its session, which frees its
// locks at once.
func TestCloseReleases(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	a := dial(t)
	if _, ok, err := a.Acquire(ctx, "close", "a", time.Minute); err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	_ = a.Close()
	if _, ok, err := dial(t).Acquire(ctx, "close", "b", time.Minute); err != nil || !ok {
		t.Fatalf("Acquire after the holder closed = %v, %v", ok, err)
	}
}

// TestSuspended: while the server is unreachable, Extend fails fast with
// ErrSuspended instead of reporting the lock lost.
func TestSuspended(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	own := startServer(t)
	b, err := zookeeper.Dial(ctx, []string{own.Addr()}, zookeeper.WithSessionTimeout(sessionTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if _, ok, err := b.Acquire(ctx, "suspended", "o", sessionTimeout); err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	own.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := b.Extend(ctx, "suspended", "o", sessionTimeout)
		if errors.Is(err, zookeeper.ErrSuspended) {
			break
		}
		if !ok && err == nil {
			t.Fatal("Extend while disconnected reported the lock lost")
		}
		if time.Now().After(deadline) {
			t.Fatalf("Extend while the server is down = %v, %v; want ErrSuspended", ok, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionLost: a partition longer than the session timeout makes the
// server expire the session and free the lock; another client takes it;
// once the partition heals, the old holder's Extend reports the lock lost
// (false, nil) rather than a transient error.
func TestSessionLost(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	p := startProxy(t, srv.Addr())
	b, err := zookeeper.Dial(ctx, []string{p.Addr()}, zookeeper.WithSessionTimeout(sessionTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tok, ok, err := b.Acquire(ctx, "lost", "old", sessionTimeout)
	if err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	p.partition(true)
	other := dial(t)
	var tok2 uint64
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		tok2, ok, err = other.Acquire(ctx, "lost", "new", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Since(start) > 3*sessionTimeout {
			t.Fatalf("lock of a partitioned holder still held after %v", time.Since(start))
		}
	}
	if tok2 <= tok {
		t.Fatalf("token after session expiry %d not greater than %d", tok2, tok)
	}
	if _, err := b.Extend(ctx, "lost", "old", sessionTimeout); !errors.Is(err, zookeeper.ErrSuspended) {
		t.Fatalf("Extend during the partition = %v, want ErrSuspended", err)
	}
	p.partition(false)
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		ok, err := b.Extend(ctx, "lost", "old", sessionTimeout)
		if !ok && err == nil {
			break // lost, as it must be
		}
		if ok {
			t.Fatal("Extend after the session expired succeeded")
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("Extend after the partition healed = %v, %v; want false, nil", ok, err)
		}
	}
	if _, ok, err := b.Acquire(ctx, "lost", "old", sessionTimeout); ok || err != nil {
		t.Fatalf("old holder's Acquire with a new session = %v, %v; want false, nil", ok, err)
	}
}
