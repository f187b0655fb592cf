package redis_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// testClusterSlotMoves: when resharding moves a key's slot to another
// master, the old master ends the shard channel's subscription; its
// waiters are woken rather than left waiting for a notice that would now
// be published elsewhere, and a new Released hears releases on the new
// master.
func testClusterSlotMoves(t *testing.T, cl *testserver.RedisCluster, admin rueidis.Client) {
	backends := map[string]*redis.Backend{"rueidis": dialCluster(t, cl), "go-redis": goRedisClusterBackend(t, cl)}
	releaser := dialCluster(t, cl)
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			k := "move:" + name
			ch, stop, err := b.Released(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			to := moveSlot(t, cl, admin, channelKey(k))
			awaitNotice(t, ch, "waiter not woken when its slot moved away")

			ch, stop2, err := b.Released(ctx, k)
			if err != nil {
				t.Fatalf("Released after the move: %v", err)
			}
			defer stop2()
			n, err := admin.Nodes()[to].Do(ctx, admin.B().Arbitrary("PUBSUB", "SHARDNUMSUB").Args(channelKey(k)).Build()).ToArray()
			if err != nil || len(n) != 2 {
				t.Fatalf("PUBSUB SHARDNUMSUB on the new master: %v %v", n, err)
			}
			if c, _ := n[1].AsInt64(); c != 1 {
				t.Fatalf("%d subscriptions on the new master, want 1", c)
			}
			releaseOnce(t, releaser, k)
			awaitNotice(t, ch, "a release on the new master did not reach the waiter")
		})
	}
}

// moveSlot reassigns the (empty) slot of key to another master, telling
// every master, and returns the new owner's address.
func moveSlot(t *testing.T, cl *testserver.RedisCluster, admin rueidis.Client, key string) string {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	slot, err := cl.Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cl.Do("CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := strconv.Atoi(slot)
	type node struct{ id, addr string }
	var from, to node
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := node{id: f[0], addr: strings.Split(f[1], "@")[0]}
		owns := false
		for _, r := range f[8:] {
			lo, hi, _ := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b, err := strconv.Atoi(hi)
			if err != nil {
				b = a
			}
			owns = owns || (a <= s && s <= b)
		}
		if owns {
			from = n
		} else if to.id == "" {
			to = n
		}
	}
	if from.id == "" || to.id == "" {
		t.Fatalf("no owner or no other master of slot %d in\n%s", s, nodes)
	}
	// The new owner first, then the old one, which drops the slot and its
	// shard channels, then the rest.
	order := []string{to.addr, from.addr}
	for _, a := range cl.Addrs() {
		if a != to.addr && a != from.addr {
			order = append(order, a)
		}
	}
	for _, a := range order {
		c := admin.Nodes()[a]
		if c == nil {
			t.Fatalf("client knows no node %s", a)
		}
		if err := c.Do(ctx, c.B().Arbitrary("CLUSTER", "SETSLOT").Args(slot, "NODE", to.id).Build()).Error(); err != nil {
			t.Fatalf("CLUSTER SETSLOT %s NODE %s on %s: %v", slot, to.id, a, err)
		}
	}
	return to.addr
}
