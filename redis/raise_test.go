package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestRaiseFence: raising the fence of a held lock makes the next token of
// the key greater than the raised one, even when the server clock is far
// behind it; a non-owner changes nothing; a lower token never lowers the
// fence; and the fence outlives the lock by the grace period.
func TestRaiseFence(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		var f driver.Fencer = b
		k := "raise:" + name
		t1, ok, err := b.Acquire(ctx, k, "a", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire: ok=%v err=%v", ok, err)
		}
		raised := t1 + 3_000_000_000_000 // a clock about five weeks ahead
		if ok, err := f.RaiseFence(ctx, k, "not-the-owner", raised+1); ok || err != nil {
			t.Fatalf("RaiseFence by a non-owner = %v, %v; want false, nil", ok, err)
		}
		if got := srv.MustDo(t, "GET", fenceKey(k)); got != strconv.FormatUint(t1, 10) {
			t.Fatalf("a refused RaiseFence changed the fence to %s", got)
		}
		if ok, err := f.RaiseFence(ctx, k, "a", raised); !ok || err != nil {
			t.Fatalf("RaiseFence by the owner = %v, %v; want true, nil", ok, err)
		}
		if got := srv.MustDo(t, "GET", fenceKey(k)); got != strconv.FormatUint(raised, 10) {
			t.Fatalf("fence after RaiseFence(%d) = %s", raised, got)
		}
		if ok, err := f.RaiseFence(ctx, k, "a", t1); !ok || err != nil {
			t.Fatalf("RaiseFence with a lower token = %v, %v; want true, nil", ok, err)
		}
		if got := srv.MustDo(t, "GET", fenceKey(k)); got != strconv.FormatUint(raised, 10) {
			t.Fatalf("a lower token moved the fence from %d to %s", raised, got)
		}
		lockTTL, _ := strconv.Atoi(srv.MustDo(t, "PTTL", lockKey(k)))
		fenceTTL, _ := strconv.Atoi(srv.MustDo(t, "PTTL", fenceKey(k)))
		if grace := int(redis.DefaultFenceGrace / time.Millisecond); fenceTTL < lockTTL+grace-1000 {
			t.Fatalf("fence PTTL %d ms, lock PTTL %d ms: the fence must outlive the lock by the grace (%d ms)", fenceTTL, lockTTL, grace)
		}
		if ok, err := b.Release(ctx, k, "a"); !ok || err != nil {
			t.Fatalf("release: ok=%v err=%v", ok, err)
		}
		t2, ok, err := b.Acquire(ctx, k, "b", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire after release: ok=%v err=%v", ok, err)
		}
		if want := nextAbove(raised, b.TokenRoom()); t2 != want {
			t.Fatalf("token after a raise to %d = %d, want %d", raised, t2, want)
		}
		if _, err := f.RaiseFence(ctx, k, "b", 1<<53); err == nil {
			t.Fatal("RaiseFence with a token of 2^53 must fail: the script cannot hold it exactly")
		}
		if ok, err := b.Release(ctx, k, "b"); !ok || err != nil {
			t.Fatalf("release: ok=%v err=%v", ok, err)
		}
		if ok, err := f.RaiseFence(ctx, k, "b", raised+10); ok || err != nil {
			t.Fatalf("RaiseFence after release = %v, %v; want false, nil", ok, err)
		}
	})
}
