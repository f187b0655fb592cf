package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestScriptFlush: the server forgetting its scripts (SCRIPT FLUSH, a
// restart, a failover) between any two operations must not make the next
// one fail: EVALSHA is answered with NOSCRIPT and the script is sent again.
func TestScriptFlush(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		k := "flush:" + name
		flush := func() { srv.MustDo(t, "SCRIPT", "FLUSH") }

		flush()
		t1, ok, err := b.Acquire(ctx, k, "o", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire after SCRIPT FLUSH: ok=%v err=%v", ok, err)
		}
		flush()
		if ok, err := b.Extend(ctx, k, "o", time.Minute); !ok || err != nil {
			t.Fatalf("extend after SCRIPT FLUSH: ok=%v err=%v", ok, err)
		}
		flush()
		res := b.ExtendMany(ctx, []driver.ExtendRequest{
			{Key: k, Owner: "o", TTL: time.Minute},
			{Key: k, Owner: "not-the-owner", TTL: time.Minute},
		})
		if !res[0].OK || res[0].Err != nil || res[1].OK || res[1].Err != nil {
			t.Fatalf("ExtendMany after SCRIPT FLUSH = %+v, want [ok, refused]", res)
		}
		flush()
		if ok, err := b.Release(ctx, k, "o"); !ok || err != nil {
			t.Fatalf("release after SCRIPT FLUSH: ok=%v err=%v", ok, err)
		}
		flush()
		t2, ok, err := b.Acquire(ctx, k, "o", time.Minute)
		if err != nil || !ok || t2 <= t1 {
			t.Fatalf("second acquire after SCRIPT FLUSH: token %d ok=%v err=%v (first token %d)", t2, ok, err, t1)
		}
	})
}
