package redis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// BenchmarkExtendMany: one op is a batch of renewals of held leases, as
// the watchdog sends those that fall due together, over rueidis, of a
// plain lock and of a semaphore's permits. docs/performance.md reports
// the figures:
//
//	cd redis && go test -run '^$' -bench ExtendMany -benchtime 2s
func BenchmarkExtendMany(b *testing.B) {
	srv := testserver.StartRedis(b)
	be := dial(b, srv)
	ctx := ctxFor(b, 10*time.Minute)
	views := []struct {
		name string
		v    renewer
	}{{"plain", be}, {"semaphore", semaphoreOf(b, be, 1)}}
	for _, v := range views {
		for _, n := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/leases=%d", v.name, n), func(b *testing.B) {
				reqs := make([]driver.ExtendRequest, n)
				for i := range reqs {
					key := fmt.Sprintf("bench-extend:%s:%d:%d", v.name, n, i)
					if _, ok, err := v.v.Acquire(ctx, key, "o", time.Minute); !ok || err != nil {
						b.Fatalf("acquire %s: ok=%v err=%v", key, ok, err)
					}
					reqs[i] = driver.ExtendRequest{Key: key, Owner: "o", TTL: time.Minute}
				}
				b.ResetTimer()
				for b.Loop() {
					for _, r := range v.v.ExtendMany(ctx, reqs) {
						if !r.OK || r.Err != nil {
							b.Fatalf("renewal: ok=%v err=%v", r.OK, r.Err)
						}
					}
				}
			})
		}
	}
}
