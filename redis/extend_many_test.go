package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// renewer is a view that renews many leases in one round trip.
type renewer interface {
	driver.Backend
	driver.BatchExtender
}

// TestExtendManyCommands: a batch of renewals (the watchdog's) is its
// EVALSHAs alone, on every view, over both client libraries: no SCRIPT
// LOAD before each batch. After the server lost its scripts, each
// renewal refused with NOSCRIPT is sent again with the script's source
// (EVAL), and every answer is still its own call's.
func TestExtendManyCommands(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		k := func(s string) string { return "extend-many:" + name + ":" + s }
		read, write := readWriteOf(t, b)
		views := []struct {
			name string
			v    renewer
		}{
			{"plain", b},
			{"fair", fairOf(t, b)},
			{"reentrant", reentrantOf(t, b)},
			{"semaphore", semaphoreOf(t, b, 3)},
			{"read", read},
			{"write", write},
		}
		for _, v := range views {
			// Held by o; nobody holds the other key. A first renewal
			// alone loads the script, as the watchdog's first would
			// have found it loaded by the grant.
			if _, ok, err := v.v.Acquire(ctx, k(v.name), "o", time.Minute); !ok || err != nil {
				t.Fatalf("%s: acquire: ok=%v err=%v", v.name, ok, err)
			}
			if ok, err := v.v.Extend(ctx, k(v.name), "o", time.Minute); !ok || err != nil {
				t.Fatalf("%s: extend alone: ok=%v err=%v", v.name, ok, err)
			}
		}
		batch := func(what string, loaded bool) {
			t.Helper()
			before := commandCounts(t, srv)
			for _, v := range views {
				res := v.v.ExtendMany(ctx, []driver.ExtendRequest{
					{Key: k(v.name), Owner: "o", TTL: time.Minute},
					{Key: k(v.name), Owner: "not-the-owner", TTL: time.Minute},
					{Key: k(v.name + ":free"), Owner: "o", TTL: time.Minute},
				})
				if len(res) != 3 || !res[0].OK || res[0].Err != nil || res[1].OK || res[1].Err != nil || res[2].OK || res[2].Err != nil {
					t.Errorf("%s: %s: ExtendMany = %+v, want [renewed, refused, refused]", v.name, what, res)
				}
			}
			sent := diff(before, commandCounts(t, srv))
			if sent["script|load"] != 0 {
				t.Errorf("%s: commands of %d batches of 3 renewals: %v, want no SCRIPT LOAD", what, len(views), sent)
			}
			if want := 3 * len(views); loaded && (sent["evalsha"] != want || sent["eval"] != 0) {
				t.Errorf("%s: commands of %d batches of 3 renewals: %v, want %d EVALSHA alone", what, len(views), sent, want)
			}
			if !loaded && sent["eval"] == 0 {
				t.Errorf("%s: commands of %d batches of 3 renewals: %v, want the scripts sent again (EVAL)", what, len(views), sent)
			}
		}
		batch("scripts loaded", true)
		// Each renewal refused with NOSCRIPT is sent again by itself,
		// which sends the script's source when the server still lacks it.
		srv.MustDo(t, "SCRIPT", "FLUSH")
		batch("after SCRIPT FLUSH", false)
		batch("scripts loaded again", true)
	})
}
