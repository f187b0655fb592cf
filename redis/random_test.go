package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestRandomized runs the randomized, fault-injecting checker of the
// Client (locktest.RunRandom) on a real redis-server: tokens with room,
// handoffs in the store, quiet and aloud releases, release notices, and
// fence.Redis as the fenced storage beside the checker's model.
// TURNSTILE_RANDOM_SEED, TURNSTILE_RANDOM_DURATION and
// TURNSTILE_RANDOM_SCENARIO steer it (see RunRandom).
func TestRandomized(t *testing.T) {
	srv := testserver.StartRedis(t)
	locktest.RunRandom(t, locktest.RandomHarness{
		New:              func(t testing.TB) driver.Backend { return dial(t, srv) },
		Fence:            func(t testing.TB) (locktest.Fence, func()) { return newGuard(t, srv) },
		Budget:           1400 * time.Millisecond,
		Package:          "./redis",
		IgnoreGoroutines: []locktest.IgnoreGoroutine{testserver.IgnoreRueidisRefresh},
	})
}

// guard is fence.Redis as the checker's fenced storage: one counter per
// resource, written with the lease's token.
type guard struct{ g *fence.Redis }

func (g guard) Write(ctx context.Context, resource string, token uint64) (bool, error) {
	_, err := g.g.IncrBy(ctx, resource, token, fence.DataKey(resource, "writes"), 1)
	if errors.Is(err, fence.ErrStaleToken) {
		return false, nil
	}
	return err == nil, err
}

// newGuard returns a guard with a client of its own, and its Close.
func newGuard(t testing.TB, srv *testserver.Redis) (locktest.Fence, func()) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := fence.NewRedis(c)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return guard{g}, c.Close
}
