package redis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/redis"
)

// TestTokensSurviveFenceEviction: losing the fence key (eviction, an
// operator's DEL) must not let a token go backwards, and a stored token
// ahead of the clock is continued from, not replaced by the clock.
func TestTokensSurviveFenceEviction(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	const k = "fence:evicted"

	t1 := acquireRelease(t, b, k, "a")
	srv.MustDo(t, "DEL", fenceKey(k))
	t2 := acquireRelease(t, b, k, "b")
	if t2 <= t1 {
		t.Fatalf("token after the fence key was evicted = %d, not greater than %d", t2, t1)
	}

	// A token far ahead of the server clock (as after a clock step back):
	// the next one must be the next multiple of the room above it, and
	// stored exactly.
	ahead := t2 + 1_000_000_000
	srv.MustDo(t, "SET", fenceKey(k), strconv.FormatUint(ahead, 10))
	t3, ok, err := b.Acquire(ctx, k, "c", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	if want := nextAbove(ahead, b.TokenRoom()); t3 != want {
		t.Fatalf("token after a stored token %d = %d, want %d", ahead, t3, want)
	}
	if got := srv.MustDo(t, "GET", fenceKey(k)); got != strconv.FormatUint(t3, 10) {
		t.Fatalf("fence key holds %q, want %d exactly", got, t3)
	}
	if ttl, _ := strconv.Atoi(srv.MustDo(t, "PTTL", fenceKey(k))); ttl <= int(time.Minute/time.Millisecond) {
		t.Fatalf("fence key PTTL %d ms while the lock has a minute left: it must outlive the lock by the grace", ttl)
	}
	if ok, err := b.Release(ctx, k, "c"); !ok || err != nil {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	// The release leaves the fence's expiry alone: it stays bounded by
	// the lock's TTL + grace from the grant.
	if ttl, _ := strconv.Atoi(srv.MustDo(t, "PTTL", fenceKey(k))); ttl <= 0 || ttl > int((time.Minute+redis.DefaultFenceGrace)/time.Millisecond) {
		t.Fatalf("fence key PTTL after release = %d ms, want within the TTL + grace %v", ttl, time.Minute+redis.DefaultFenceGrace)
	}
}

// TestTokensSurviveRestart: a restart without persistence loses every
// lock and fence key; the server clock still yields larger tokens.
func TestTokensSurviveRestart(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	const k = "fence:restart"

	t1, ok, err := b.Acquire(ctx, k, "before", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	srv.Restart()
	// The client reconnects by itself; the first commands may still see
	// the old connection fail.
	deadline := time.Now().Add(10 * time.Second)
	for {
		t2, ok, err := b.Acquire(ctx, k, "after", time.Minute)
		if err == nil {
			if !ok {
				t.Fatal("the lock survived a restart without persistence")
			}
			if t2 <= t1 {
				t.Fatalf("token after restart = %d, not greater than %d", t2, t1)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("acquire after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func acquireRelease(t *testing.T, b *redis.Backend, key, owner string) uint64 {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	tok, ok, err := b.Acquire(ctx, key, owner, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire %q: ok=%v err=%v", key, ok, err)
	}
	if ok, err := b.Release(ctx, key, owner); !ok || err != nil {
		t.Fatalf("release %q: ok=%v err=%v", key, ok, err)
	}
	return tok
}

// TestTTLsAlternate: acquisitions with different TTLs on one Backend, one
// after another, each set the lock's and the fence's expiry from their
// own TTL (the Backend keeps the last TTL's script arguments).
func TestTTLsAlternate(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	for i, ttl := range []time.Duration{time.Minute, 2 * time.Minute, time.Minute, 3 * time.Minute, 3 * time.Minute} {
		k := "ttl:" + strconv.Itoa(i)
		if _, ok, err := b.Acquire(ctx, k, "o", ttl); !ok || err != nil {
			t.Fatalf("acquire %s: ok=%v err=%v", k, ok, err)
		}
		want := int(ttl / time.Millisecond)
		if pttl, _ := strconv.Atoi(srv.MustDo(t, "PTTL", lockKey(k))); pttl <= want-5000 || pttl > want {
			t.Errorf("%s: lock PTTL %d ms, want about %d", k, pttl, want)
		}
		want += int(redis.DefaultFenceGrace / time.Millisecond)
		if pttl, _ := strconv.Atoi(srv.MustDo(t, "PTTL", fenceKey(k))); pttl <= want-5000 || pttl > want {
			t.Errorf("%s: fence PTTL %d ms, want about %d", k, pttl, want)
		}
	}
}

// nextAbove is the first multiple of room above last: the token a grant
// issues after last (token.lua).
func nextAbove(last, room uint64) uint64 { return (last/room + 1) * room }
