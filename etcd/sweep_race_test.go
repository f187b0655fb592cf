package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// heldBy reports the owner of the lock on key, "" when it is free.
func heldBy(t *testing.T, raw *clientv3.Client, key string) string {
	t.Helper()
	owner, err := ownerOf(ctxFor(t, 5*time.Second), raw, key)
	if err != nil {
		t.Fatal(err)
	}
	return owner
}

// ownerOf reports the owner of the lock on key, "" when it is free.
func ownerOf(ctx context.Context, raw *clientv3.Client, key string) (string, error) {
	r, err := raw.Get(ctx, lockKey(key))
	if err != nil || len(r.Kvs) == 0 {
		return "", err
	}
	return string(r.Kvs[0].Value), nil
}

// waitTracked waits until b tracks n keys (its sweeper has ended the
// others), for 20 s at most.
func waitTracked(t *testing.T, b *etcd.Backend, n int) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); b.Tracked() != n; {
		if time.Now().After(end) {
			t.Fatalf("the backend tracks %d keys, want %d", b.Tracked(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCallsRaceTheSweeper: an Extend or a Release of a lock at about its
// deadline, when the sweeper may be deleting it. An Extend that reports
// the lock still held has it in etcd for its TTL from the Extend's start
// (the sweeper does not delete it under the Extend); one that reports
// it lost leaves it to be deleted. A Release ends it either way, and the
// owner who takes the key next keeps it: no sweep of the earlier write
// touches the new one.
func TestCallsRaceTheSweeper(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, 2*time.Minute)
	if _, ok, err := b.Acquire(ctx, "busy", "ob", shortTTL); !ok || err != nil {
		t.Fatalf("acquire busy = %v, %v", ok, err)
	}
	_, busyFailed := renewing(t, b, "busy", "ob")
	offsets := []time.Duration{-200 * time.Millisecond, -50 * time.Millisecond, -10 * time.Millisecond, 0, 10 * time.Millisecond, 50 * time.Millisecond}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for i, off := range offsets {
		for _, op := range []string{"extend", "release"} {
			key, owner := fmt.Sprintf("%s-%d", op, i), fmt.Sprintf("o-%s-%d", op, i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				if _, ok, err := b.Acquire(ctx, key, owner, shortTTL); !ok || err != nil {
					report("acquire %s = %v, %v", key, ok, err)
					return
				}
				time.Sleep(time.Until(start.Add(shortTTL + off)))
				called := time.Now()
				switch op {
				case "extend":
					ok, err := b.Extend(ctx, key, owner, shortTTL)
					looked := time.Now()
					held, gerr := ownerOf(ctx, raw, key)
					switch {
					case gerr != nil:
						report("read %s: %v", key, gerr)
					case err != nil:
						report("extend %s at %v = %v", key, off, err)
					case ok && held != owner && looked.Sub(called) < shortTTL:
						report("extend %s at %v reported the lock held, but it is gone %v later", key, off, looked.Sub(called))
					}
				case "release":
					if _, err := b.Release(ctx, key, owner); err != nil {
						report("release %s at %v = %v", key, off, err)
					}
					if held, err := ownerOf(ctx, raw, key); err != nil || held == owner {
						report("release %s at %v left it held by %q (%v)", key, off, held, err)
					}
					// The next owner's lock outlives the earlier write's
					// deadline by a TTL.
					next := owner + "-next"
					if _, ok, err := b.Acquire(ctx, key, next, shortTTL); !ok || err != nil {
						report("acquire %s after the release = %v, %v", key, ok, err)
						return
					}
					for range 10 {
						time.Sleep(shortTTL / 5)
						if ok, err := b.Extend(ctx, key, next, shortTTL); !ok || err != nil {
							report("the next owner's lock %s: extend = %v, %v", key, ok, err)
							return
						}
					}
					if _, err := b.Release(ctx, key, next); err != nil {
						report("release %s = %v", key, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	for i := range offsets {
		gone(t, raw, fmt.Sprintf("extend-%d", i), time.Now(), 20*time.Second)
	}
	noFailure(t, "the renewed lock", busyFailed)
	waitTracked(t, b, 1) // the renewed lock alone
}

// TestOwnerIDOnTwoBackends: two backends (two processes) given one
// owner id both hold its lock. The one that keeps calling Extend keeps
// the lock though the other stopped — the other's sweeper never ends a
// write it did not make — and when both stop, the lock ends, though both
// backends' shared leases are renewed by other locks.
func TestOwnerIDOnTwoBackends(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	a, b := dial(t, srv), dial(t, srv)
	ctx := ctxFor(t, 2*time.Minute)
	for i, be := range []*etcd.Backend{a, b} {
		busy := fmt.Sprint("busy-", i)
		if _, ok, err := be.Acquire(ctx, busy, "ob", shortTTL); !ok || err != nil {
			t.Fatalf("acquire %s = %v, %v", busy, ok, err)
		}
		_, failed := renewing(t, be, busy, "ob")
		t.Cleanup(func() { noFailure(t, busy, failed) })
	}
	const k = "shared-owner"
	if _, ok, err := a.Acquire(ctx, k, "x", shortTTL); !ok || err != nil {
		t.Fatalf("acquire through a = %v, %v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, k, "x", shortTTL); !ok || err != nil {
		t.Fatalf("acquire of the same owner through b = %v, %v", ok, err)
	}
	for _, pass := range []struct {
		name string
		be   *etcd.Backend
	}{{"b", b}, {"a", a}, {"b", b}} {
		stop, failed := renewing(t, pass.be, k, "x")
		time.Sleep(3 * shortTTL)
		stop()
		noFailure(t, "extending through "+pass.name, failed)
		if held := heldBy(t, raw, k); held != "x" {
			t.Fatalf("the lock extended through %s: held by %q", pass.name, held)
		}
	}
	gone(t, raw, k, time.Now(), 20*time.Second)
}

// TestForceReleasedLockTakenAgain: after a forced release — through the
// holder's backend or another — a new owner's lock on the key is not
// ended by the earlier holder's deadline.
func TestForceReleasedLockTakenAgain(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	b, other := dial(t, srv), dial(t, srv)
	ctx := ctxFor(t, 2*time.Minute)
	if _, ok, err := b.Acquire(ctx, "busy", "ob", shortTTL); !ok || err != nil {
		t.Fatalf("acquire busy = %v, %v", ok, err)
	}
	_, busyFailed := renewing(t, b, "busy", "ob")
	for i, forcer := range []*etcd.Backend{b, other} {
		key := fmt.Sprint("forced-", i)
		if _, ok, err := b.Acquire(ctx, key, "first", shortTTL); !ok || err != nil {
			t.Fatalf("acquire %s = %v, %v", key, ok, err)
		}
		if _, err := forcer.ForceRelease(ctx, key); err != nil {
			t.Fatalf("force release %s: %v", key, err)
		}
		if _, ok, err := other.Acquire(ctx, key, "second", shortTTL); !ok || err != nil {
			t.Fatalf("acquire %s after the forced release = %v, %v", key, ok, err)
		}
		stop, failed := renewing(t, other, key, "second")
		time.Sleep(2 * shortTTL)
		stop()
		noFailure(t, "the new owner's lock "+key, failed)
		if held := heldBy(t, raw, key); held != "second" {
			t.Fatalf("%s: held by %q, want the new owner", key, held)
		}
	}
	noFailure(t, "the renewed lock", busyFailed)
	waitTracked(t, b, 1) // the renewed lock alone
}

// TestSharedLeaseRevokedOutside: when the shared lease is revoked behind
// the backend's back, its locks go with it and the backend forgets them;
// a new owner of one of those keys, on the next lease, keeps its lock
// past the earlier holder's deadline.
func TestSharedLeaseRevokedOutside(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)
	ctx := ctxFor(t, time.Minute)
	for _, k := range []string{"a", "c"} {
		if _, ok, err := b.Acquire(ctx, k, "o-"+k, shortTTL); !ok || err != nil {
			t.Fatalf("acquire %s = %v, %v", k, ok, err)
		}
	}
	if _, err := raw.Revoke(ctx, leaseOf(t, raw, "a")); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Extend(ctx, "a", "o-a", shortTTL); ok || err != nil {
		t.Fatalf("extend of a lock whose lease was revoked = %v, %v; want false, nil", ok, err)
	}
	if n := b.Tracked(); n != 0 {
		t.Fatalf("the backend tracks %d keys of a revoked lease", n)
	}
	if _, ok, err := b.Acquire(ctx, "a", "o-a2", shortTTL); !ok || err != nil {
		t.Fatalf("acquire after the revocation = %v, %v", ok, err)
	}
	stop, failed := renewing(t, b, "a", "o-a2")
	time.Sleep(2 * shortTTL)
	stop()
	noFailure(t, "the lock on the new lease", failed)
	if held := heldBy(t, raw, "a"); held != "o-a2" {
		t.Fatalf("held by %q, want o-a2", held)
	}
}
