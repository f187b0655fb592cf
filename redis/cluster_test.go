package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redis"
)

// TestCluster runs the backend against a real Redis Cluster of three
// masters, started once for all its subtests.
func TestCluster(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) }) // runs last: after every client closed
	cl := testserver.StartRedisCluster(t)
	admin := clusterAdmin(t, cl)

	// Conformance last: rueidis cluster clients leave timers of a few
	// seconds behind (see testserver.AwaitRueidisTimers), which it outlasts.
	t.Run("URL", func(t *testing.T) { testClusterURL(t, cl) })
	t.Run("WaitReplicasRefused", func(t *testing.T) { testClusterWaitReplicas(t, cl) })
	t.Run("KeysShareASlot", func(t *testing.T) { testClusterSlots(t, cl, admin) })
	t.Run("ReleaseNotices", func(t *testing.T) { testClusterNotices(t, cl, admin) })
	t.Run("GoRedisClusterClient", func(t *testing.T) { testClusterGoRedis(t, cl) })
	t.Run("SlotMoves", func(t *testing.T) { testClusterSlotMoves(t, cl, admin) })
	evict := func(t testing.TB, key string) {
		if err := admin.Do(context.Background(), admin.B().Del().Key(lockKey(key)).Build()).Error(); err != nil {
			t.Fatalf("evict %s: %v", key, err)
		}
	}
	t.Run("Conformance", func(t *testing.T) {
		t.Run("rueidis", func(t *testing.T) {
			// The instances share one client: dialling a cluster client
			// takes long enough under -race to eat into the suite's timing
			// margins, which it measures from before New. The processes of
			// the multi-process cases dial clients of their own.
			shared := clusterAdmin(t, cl)
			locktest.Run(t, locktest.Harness{
				New: func(t testing.TB) driver.Backend {
					b, err := redis.New(shared)
					if err != nil {
						t.Fatal(err)
					}
					return b
				},
				URL:   cl.URL(),
				Evict: evict,
			})
		})
		t.Run("go-redis", func(t *testing.T) {
			locktest.Run(t, locktest.Harness{
				New:   func(t testing.TB) driver.Backend { return goRedisClusterBackend(t, cl) },
				URL:   cl.URL(),
				Evict: evict,
			})
		})
	})
}

// trickyKeys are lock keys whose hash tag is easy to get wrong: braces of
// their own, a leading '}' or '\', empty and unbalanced tags, multi-byte
// text.
var trickyKeys = []string{
	"lock:inventory:12345",
	"lock:inventory:{w1}:{p9}",
	"{w1}",
	"{}",
	"{",
	"}",
	"}{",
	"}a{b}",
	`\`,
	`\}`,
	"a}b",
	"a{b",
	"{{a}}",
	"lock:재고:{창고}",
	"with space and\nnewline",
	strings.Repeat("k", 500),
}

// testClusterSlots: the lock, fence and channel names of every tricky key
// hash to one slot, with and without a prefix; and the scripts, which
// Redis Cluster refuses when their keys span slots, run on each of them.
func testClusterSlots(t *testing.T, cl *testserver.RedisCluster, admin rueidis.Client) {
	ctx := ctxFor(t, time.Minute)
	for _, prefix := range []string{"", "app:"} {
		var b *redis.Backend
		if prefix == "" {
			b = dialCluster(t, cl)
		} else {
			b = dialCluster(t, cl, redis.WithPrefix(prefix))
		}
		for _, k := range trickyKeys {
			name := fmt.Sprintf("prefix %q key %.40q", prefix, k)
			lock := prefix + lockKey(k)
			var slots []string
			for _, n := range []string{lock, prefix + fenceKey(k), prefix + channelKey(k)} {
				s, err := cl.Do("CLUSTER", "KEYSLOT", n)
				if err != nil {
					t.Fatalf("%s: CLUSTER KEYSLOT %q: %v", name, n, err)
				}
				slots = append(slots, s)
			}
			if slots[0] != slots[1] || slots[0] != slots[2] {
				t.Errorf("%s: lock, fence and channel hash to slots %v, want one", name, slots)
			}

			owner := "owner-" + strconv.Itoa(len(k))
			tok, ok, err := b.Acquire(ctx, k, owner, time.Minute)
			if err != nil || !ok || tok == 0 {
				t.Fatalf("%s: acquire: token %d ok=%v err=%v", name, tok, ok, err)
			}
			got, err := admin.Do(ctx, admin.B().Get().Key(lock).Build()).ToString()
			if err != nil || got != owner {
				t.Errorf("%s: GET %q = %q, %v; want the owner %q", name, lock, got, err, owner)
			}
			if ok, err := b.Extend(ctx, k, owner, time.Minute); !ok || err != nil {
				t.Errorf("%s: extend: ok=%v err=%v", name, ok, err)
			}
			res := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: k, Owner: owner, TTL: time.Minute}})
			if !res[0].OK || res[0].Err != nil {
				t.Errorf("%s: ExtendMany = %+v", name, res[0])
			}
			ch, stop, err := b.Released(ctx, k)
			if err != nil {
				t.Fatalf("%s: Released: %v", name, err)
			}
			if _, ok, err := b.Acquire(ctx, k, "waiter", time.Minute); ok || err != nil {
				t.Errorf("%s: a second owner's acquire: ok=%v err=%v, want refused", name, ok, err)
			}
			if ok, err := b.Release(ctx, k, owner); !ok || err != nil {
				t.Errorf("%s: release: ok=%v err=%v", name, ok, err)
			}
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Errorf("%s: no release notice", name)
			}
			stop()
		}
	}
}

// noticeKeys returns keys whose slots lie on every master, as
// redis-cli --cluster create splits the slots into equal ranges.
func noticeKeys(t *testing.T, cl *testserver.RedisCluster) []string {
	t.Helper()
	const perMaster = 16384/testserver.ClusterMasters + 1
	var keys []string
	seen := map[int]bool{}
	for i := 0; len(seen) < testserver.ClusterMasters || len(keys) < 12; i++ {
		k := "notice:" + strconv.Itoa(i)
		s, err := cl.Do("CLUSTER", "KEYSLOT", channelKey(k))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(s)
		seen[n/perMaster] = true
		keys = append(keys, k)
	}
	return keys
}

// testClusterNotices: a waiter hears of a release made by another client,
// for keys on every master, through a shard channel subscribed on the
// master that owns the key.
func testClusterNotices(t *testing.T, cl *testserver.RedisCluster, admin rueidis.Client) {
	keys := noticeKeys(t, cl)
	backends := map[string]*redis.Backend{"rueidis": dialCluster(t, cl), "go-redis": goRedisClusterBackend(t, cl)}
	releaser := dialCluster(t, cl)
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			chans := make([]<-chan struct{}, len(keys))
			for i, k := range keys {
				ch, stop, err := b.Released(ctx, name+":"+k)
				if err != nil {
					t.Fatalf("Released(%s): %v", k, err)
				}
				defer stop()
				chans[i] = ch
				channel := channelKey(name + ":" + k)
				n, err := admin.Do(ctx, admin.B().Eval().Script("return redis.call('PUBSUB', 'SHARDNUMSUB', KEYS[1])[2]").Numkeys(1).Key(channel).Build()).AsInt64()
				if err != nil || n != 1 {
					t.Fatalf("PUBSUB SHARDNUMSUB %s on its master = %d, %v; want 1", channel, n, err)
				}
			}
			for _, k := range keys {
				releaseOnce(t, releaser, name+":"+k)
			}
			for i, ch := range chans {
				awaitNotice(t, ch, fmt.Sprintf("no release notice for %s", keys[i]))
			}
		})
	}
}

// testClusterGoRedis: the go-redis adapter over a *ClusterClient takes,
// renews and releases locks on every master, and recovers when every
// master forgot its scripts (EVALSHA answered with NOSCRIPT), alone and in
// a pipelined batch spanning the masters.
func testClusterGoRedis(t *testing.T, cl *testserver.RedisCluster) {
	ctx := ctxFor(t, time.Minute)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	b, err := redis.NewGoRedis(c)
	if err != nil {
		t.Fatal(err)
	}
	flush := func() {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH on every master: %v", err)
		}
	}
	keys := noticeKeys(t, cl)
	tokens := make([]uint64, len(keys))
	flush()
	for i, k := range keys {
		tok, ok, err := b.Acquire(ctx, k, "o", time.Minute)
		if err != nil || !ok || tok == 0 {
			t.Fatalf("acquire %s: token %d ok=%v err=%v", k, tok, ok, err)
		}
		if _, ok, err := b.Acquire(ctx, k, "other", time.Minute); ok || err != nil {
			t.Fatalf("acquire of a held lock %s by another owner: ok=%v err=%v", k, ok, err)
		}
		tokens[i] = tok
	}
	flush()
	if ok, err := b.Extend(ctx, keys[0], "o", time.Minute); !ok || err != nil {
		t.Fatalf("extend: ok=%v err=%v", ok, err)
	}
	flush()
	var reqs []driver.ExtendRequest
	for _, k := range keys {
		reqs = append(reqs, driver.ExtendRequest{Key: k, Owner: "o", TTL: time.Minute}, driver.ExtendRequest{Key: k, Owner: "other", TTL: time.Minute})
	}
	for i, r := range b.ExtendMany(ctx, reqs) {
		if r.Err != nil || r.OK != (i%2 == 0) {
			t.Fatalf("ExtendMany[%d] (owner %s) = %+v", i, reqs[i].Owner, r)
		}
	}
	flush()
	for i, k := range keys {
		if ok, err := b.Release(ctx, k, "other"); ok || err != nil {
			t.Fatalf("release by a non-owner: ok=%v err=%v", ok, err)
		}
		if ok, err := b.Release(ctx, k, "o"); !ok || err != nil {
			t.Fatalf("release %s: ok=%v err=%v", k, ok, err)
		}
		tok, ok, err := b.Acquire(ctx, k, "o2", time.Minute)
		if err != nil || !ok || tok <= tokens[i] {
			t.Fatalf("re-acquire %s: token %d ok=%v err=%v, want above %d", k, tok, ok, err, tokens[i])
		}
		if ok, err := b.Release(ctx, k, "o2"); !ok || err != nil {
			t.Fatalf("release %s: ok=%v err=%v", k, ok, err)
		}
	}
}

// clusterAdmin returns a cluster-aware client for inspecting the
// cluster, closed when the test ends.
func clusterAdmin(t testing.TB, cl *testserver.RedisCluster) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// dialCluster returns a backend with a rueidis client of its own over the
// cluster, closed when the test ends.
func dialCluster(t testing.TB, cl *testserver.RedisCluster, opts ...redis.Option) *redis.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: cl.Addrs()}, opts...)
	if err != nil {
		t.Fatalf("redis.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// goRedisClusterBackend returns a backend over a go-redis ClusterClient
// closed when the test ends.
func goRedisClusterBackend(t testing.TB, cl *testserver.RedisCluster) *redis.Backend {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	b, err := redis.NewGoRedis(c)
	if err != nil {
		t.Fatalf("NewGoRedis: %v", err)
	}
	return b
}

// testClusterWaitReplicas: wait_replicas cannot work on a cluster (WAIT
// has no key to route it by): a URL with several hosts is refused as it
// is read, one host that turns out to be a cluster node when dialled.
func testClusterWaitReplicas(t *testing.T, cl *testserver.RedisCluster) {
	ctx := ctxFor(t, 30*time.Second)
	for _, u := range []string{cl.URL() + "?wait_replicas=1", "redis://" + cl.Addrs()[0] + "?wait_replicas=1"} {
		c, err := turnstile.Open(ctx, u)
		if c != nil {
			_ = c.Close()
		}
		if !errors.Is(err, turnstile.ErrInvalidURL) && !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL or ErrInvalidOption", u, err)
		} else if !strings.Contains(err.Error(), "Cluster") {
			t.Errorf("Open(%s) = %v: the error does not name the cluster", u, err)
		}
	}
}
