package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

func acquireOp(key, owner string) driver.Op {
	return driver.Op{Kind: driver.OpAcquire, Key: key, Owner: owner, TTL: time.Minute}
}

func releaseOp(key, owner string) driver.Op {
	return driver.Op{Kind: driver.OpRelease, Key: key, Owner: owner}
}

// TestDoMany: a batch of acquisitions and releases answers each op as
// its own call would, and sends them as EVALSHAs alone (no SCRIPT LOAD
// per batch, no EVAL), falling back to the script's source when the
// server lost it.
func TestDoMany(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		k := func(s string) string { return "many:" + name + ":" + s }
		// Loads both scripts.
		if _, ok, err := b.Acquire(ctx, k("b"), "o1", time.Minute); !ok || err != nil {
			t.Fatalf("acquire b by o1: ok=%v err=%v", ok, err)
		}
		if ok, err := b.Release(ctx, k("warm"), "o"); ok || err != nil {
			t.Fatalf("release of a key never held: ok=%v err=%v", ok, err)
		}
		before := commandCounts(t, srv)
		res := b.DoMany(ctx, []driver.Op{
			acquireOp(k("a"), "o1"),
			acquireOp(k("b"), "o2"), // held by o1: refused, and marks it tried
			releaseOp(k("c"), "o1"), // never held
			acquireOp("", "o1"),
			{Kind: 9, Key: k("d"), Owner: "o1"},
		})
		if len(res) != 5 {
			t.Fatalf("%d results for 5 ops", len(res))
		}
		if r := res[0]; !r.OK || r.Err != nil || r.Token == 0 || r.Token%b.TokenRoom() != 0 {
			t.Errorf("acquire a by o1: %+v", r)
		}
		if r := res[1]; r.OK || r.Err != nil {
			t.Errorf("acquire b by o2, held by o1: %+v, want refused", r)
		}
		if r := res[2]; r.OK || r.Err != nil {
			t.Errorf("release of c, never held: %+v", r)
		}
		if r := res[3]; !errors.Is(r.Err, turnstile.ErrInvalidKey) {
			t.Errorf("acquire of the empty key: %+v, want ErrInvalidKey", r)
		}
		if r := res[4]; !errors.Is(r.Err, turnstile.ErrInvalidOption) {
			t.Errorf("op of kind 9: %+v, want ErrInvalidOption", r)
		}
		sent := diff(before, commandCounts(t, srv))
		if sent["evalsha"] != 3 || sent["eval"] != 0 || sent["script|load"] != 0 {
			t.Errorf("commands of the batch: %v, want 3 EVALSHA and no EVAL or SCRIPT LOAD", sent)
		}
		res = b.DoMany(ctx, []driver.Op{releaseOp(k("b"), "o1"), acquireOp(k("a"), "o2")})
		if r := res[0]; !r.OK || !r.Tried || r.Err != nil {
			t.Errorf("release of b, tried by o2: %+v, want released and tried", r)
		}
		if r := res[1]; r.OK || r.Err != nil {
			t.Errorf("acquire a by o2, held by o1: %+v, want refused", r)
		}
		res = b.DoMany(ctx, []driver.Op{acquireOp(k("b"), "o2")})
		if r := res[0]; !r.OK || r.Err != nil || r.Token <= 0 {
			t.Errorf("acquire b by o2 after its release: %+v", r)
		}
		for _, h := range []struct {
			key, owner string
			held       bool
		}{{k("a"), "o1", true}, {k("b"), "o2", true}, {k("b"), "o1", false}, {k("d"), "o1", false}} {
			if ok, err := b.Extend(ctx, h.key, h.owner, time.Minute); ok != h.held || err != nil {
				t.Errorf("after the batch, %s held by %s: %v (%v), want %v", h.key, h.owner, ok, err, h.held)
			}
		}

		// Someone tried a while o1 held it: its release says so.
		srv.MustDo(t, "SCRIPT", "FLUSH")
		res = b.DoMany(ctx, []driver.Op{releaseOp(k("a"), "o1"), acquireOp(k("e"), "o1")})
		if r := res[0]; !r.OK || !r.Tried || r.Err != nil {
			t.Errorf("release of a after SCRIPT FLUSH, tried by o2: %+v, want released and tried", r)
		}
		if r := res[1]; !r.OK || r.Err != nil {
			t.Errorf("acquire after SCRIPT FLUSH: %+v", r)
		}

		// A batch for a context that has ended sends nothing.
		done, cancel := context.WithCancel(ctx)
		cancel()
		for i, r := range b.DoMany(done, []driver.Op{acquireOp(k("f"), "o1"), releaseOp(k("e"), "o1")}) {
			if !errors.Is(r.Err, context.Canceled) || r.OK {
				t.Errorf("op %d for an ended context: %+v, want context.Canceled", i, r)
			}
		}
		if ok, err := b.Extend(ctx, k("e"), "o1", time.Minute); !ok || err != nil {
			t.Errorf("e after the ended batch: held %v (%v), want still held", ok, err)
		}
		if len(b.DoMany(ctx, nil)) != 0 {
			t.Error("an empty batch answered something")
		}
	})
}

// TestDoManyWaitsForReplicas: with WithWaitReplicas each op of a batch
// is made by its own call, which waits for the replicas: on a server
// without any, the grant is refused and undone.
func TestDoManyWaitsForReplicas(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := dial(t, srv, redis.WithWaitReplicas(1, 10*time.Millisecond))
	ctx := ctxFor(t, 10*time.Second)
	res := b.DoMany(ctx, []driver.Op{acquireOp("w1", "o"), releaseOp("w2", "o")})
	wantReplicationError(t, "DoMany's acquire without replicas", res[0].Err, 1)
	if r := res[1]; r.OK || r.Err != nil {
		t.Errorf("release of a key never held: %+v", r)
	}
	if n := srv.MustDo(t, "EXISTS", "{w1}"); n != "0" {
		t.Fatal("the unconfirmed grant was left held")
	}
}

// TestDoManyOnACluster: a batch's ops on keys of every node of a Cluster
// each reach the node that owns their key, with either client library.
func TestDoManyOnACluster(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) }) // runs last: after every client closed
	cl := testserver.StartRedisCluster(t)
	for name, b := range map[string]*redis.Backend{"rueidis": dialCluster(t, cl), "go-redis": goRedisClusterBackend(t, cl)} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			var acquire, release []driver.Op
			for i := range 32 { // 32 keys: every node owns some
				key := "many:" + name + ":" + strconv.Itoa(i)
				acquire = append(acquire, acquireOp(key, "o"))
				release = append(release, releaseOp(key, "o"))
			}
			for i, r := range b.DoMany(ctx, acquire) {
				if !r.OK || r.Err != nil || r.Token == 0 {
					t.Fatalf("acquire %s: %+v", acquire[i].Key, r)
				}
			}
			for i, r := range b.DoMany(ctx, release) {
				if !r.OK || r.Err != nil {
					t.Fatalf("release %s: %+v", release[i].Key, r)
				}
			}
		})
	}
}
