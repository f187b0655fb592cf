package redis_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// TestSemaphoreStoredPermits: the number of permits lives beside the
// permits' set, as long as the permits do: written by an acquisition,
// renewed with them, gone with the last release.
func TestSemaphoreStoredPermits(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	sem := semaphoreOf(t, b, 2)
	k := "sem:stored"
	count := lockKey(k) + ":semaphore:permits"
	if _, ok, err := sem.Acquire(ctx, k, "a", 2*time.Second); !ok || err != nil {
		t.Fatalf("permit: %v %v", ok, err)
	}
	if got := srv.MustDo(t, "GET", count); got != "2" {
		t.Fatalf("stored number = %q, want 2", got)
	}
	if ok, err := sem.Extend(ctx, k, "a", time.Minute); !ok || err != nil {
		t.Fatalf("extend: %v %v", ok, err)
	}
	if ms := atoi(t, srv.MustDo(t, "PTTL", count)); ms < 30000 {
		t.Fatalf("the stored number expires in %d ms after a renewal to a minute", ms)
	}
	if ok, err := sem.Release(ctx, k, "a"); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if got := srv.MustDo(t, "EXISTS", count); got != "0" {
		t.Fatal("the stored number outlived the last permit")
	}
}

// TestSemaphorePermitsOfEarlierVersion: permits taken by a version that
// stored no number count against the caller's number, which is stored
// from then on, during a rolling deploy.
func TestSemaphorePermitsOfEarlierVersion(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	k := "sem:old"
	set := lockKey(k) + ":semaphore"
	// Two permits as the earlier version wrote them: the set alone.
	exp := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	srv.MustDo(t, "ZADD", set, exp, "old-1", exp, "old-2")
	srv.MustDo(t, "PEXPIRE", set, "3600000")
	three := semaphoreOf(t, b, 3)
	two := semaphoreOf(t, b, 2)
	if _, ok, err := two.Acquire(ctx, k, "new-2", time.Minute); ok || err != nil {
		t.Fatalf("a third permit of two, beside two old ones: %v %v, want refused", ok, err)
	}
	if _, ok, err := three.Acquire(ctx, k, "new-3", time.Minute); !ok || err != nil {
		t.Fatalf("a third permit of three, beside two old ones: %v %v", ok, err)
	}
	if got := srv.MustDo(t, "GET", lockKey(k)+":semaphore:permits"); got != "3" {
		t.Fatalf("stored number = %q, want 3", got)
	}
	_, _, err := two.Acquire(ctx, k, "new-2", time.Minute)
	if !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "held with 3 permits") || !strings.Contains(err.Error(), "has 2") {
		t.Fatalf("a view with 2 once 3 is stored: %v, want ErrInvalidOption naming 3 and 2", err)
	}
}
