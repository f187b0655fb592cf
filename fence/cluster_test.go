package fence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestRedisCluster: on a real Redis Cluster, data keys in the resource's
// slot are written atomically with the guard; others are refused with
// ErrCrossSlot, before any round trip by a cluster client (rueidis would
// panic building the command) and from Redis's CROSSSLOT reply otherwise.
func TestRedisCluster(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) }) // runs last: after the clients closed
	cl := testserver.StartRedisCluster(t)
	ctx := ctxFor(t, time.Minute)
	const r = "inventory:1"

	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	g := newRedis(t, c)

	stock := fence.DataKey(r, "stock")
	if n, err := g.IncrBy(ctx, r, 2, stock, 10); err != nil || n != 10 {
		t.Fatalf("IncrBy in the resource's slot = %d, %v; want 10", n, err)
	}
	_, err = g.IncrBy(ctx, r, 1, stock, -1)
	wantStale(t, err, r, 1, 2)

	// A key in another slot than the resource's.
	other := "stock:1"
	if slot(t, cl, other) == slot(t, cl, fence.GuardKey(r)) {
		t.Fatalf("test keys %q and %q share a slot", other, fence.GuardKey(r))
	}
	if _, err := g.IncrBy(ctx, r, 3, other, -1); !errors.Is(err, fence.ErrCrossSlot) {
		t.Fatalf("cluster client, key in another slot: %v, want ErrCrossSlot", err)
	}

	// A client that does not know it talks to a cluster node: Redis
	// refuses the script with CROSSSLOT.
	single, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()[:1], ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(single.Close)
	err = newRedis(t, single).Set(ctx, r, 3, other, "x")
	if !errors.Is(err, fence.ErrCrossSlot) || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("single-node client, key in another slot: %v, want ErrCrossSlot from Redis's CROSSSLOT", err)
	}
	if errors.Is(err, fence.ErrStaleToken) {
		t.Fatal("a CROSSSLOT error counts as a stale token")
	}
	if last, err := g.Last(ctx, r); err != nil || last != 2 {
		t.Fatalf("Last = %d, %v; want 2: a refused write recorded its token", last, err)
	}
}

func slot(t testing.TB, cl *testserver.RedisCluster, key string) string {
	t.Helper()
	s, err := cl.Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
	}
	return s
}
