package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestForceReleaseRaisesFences: one forced release raises the fence key
// to the floor, the multiple of the token room above the removed token
// (above every token its Client may have handed on without the store),
// raises the fence package's guard key of the resource, when it exists,
// to at least the floor (so a guard that accepts equal tokens refuses
// the old holders'), leaves a missing guard missing, deletes the lock and
// publishes the release notice.
func TestForceReleaseRaisesFences(t *testing.T) {
	srv, ctx := startRedis(t)
	for _, tc := range []struct {
		name, backend string
		b             *redis.Backend
	}{
		{"rueidis", "rueidis", dial(t, srv)},
		{"go-redis", "go-redis", goRedisBackend(t, srv)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			key, unguarded := "report:"+tc.name, "unguarded:"+tc.name
			guard := lockKey(key) + ":guard"
			tok, ok, err := b.Acquire(ctx, key, "stuck-owner", time.Minute)
			if err != nil || !ok {
				t.Fatalf("Acquire: %v %v", ok, err)
			}
			// The guard accepted an older holder's token: below the one held.
			srv.MustDo(t, "SET", guard, strconv.FormatUint(tok-5, 10))
			notices, stop, err := b.Released(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()

			st, err := b.ForceRelease(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "stuck-owner" || st.Holders[0].Token != tok {
				t.Errorf("removed %+v, want stuck-owner with token %d", st, tok)
			}
			floor := tok + b.TokenRoom()
			if st.Token != floor {
				t.Errorf("fence floor %d, want %d (the removed token + the room)", st.Token, floor)
			}
			if g := srv.MustDo(t, "GET", guard); g != strconv.FormatUint(floor, 10) {
				t.Errorf("guard key = %s, want %d", g, floor)
			}
			if f := srv.MustDo(t, "GET", fenceKey(key)); f != strconv.FormatUint(floor, 10) {
				t.Errorf("fence key = %s, want %d", f, floor)
			}
			if n := srv.MustDo(t, "EXISTS", lockKey(key)); n != "0" {
				t.Errorf("lock key still exists after ForceRelease")
			}
			select {
			case <-notices:
			case <-time.After(10 * time.Second):
				t.Error("no release notice after ForceRelease")
			}
			if ok, err := b.Extend(ctx, key, "stuck-owner", time.Minute); ok || err != nil {
				t.Errorf("the removed owner's Extend = %v, %v; want refused", ok, err)
			}
			next, ok, err := b.Acquire(ctx, key, "next-owner", time.Minute)
			if err != nil || !ok || next <= floor {
				t.Errorf("next Acquire = %d %v %v; want a token above the guard's %d", next, ok, err, floor)
			}
			// A guard above the floor is left alone.
			srv.MustDo(t, "SET", guard, strconv.FormatUint(next+100, 10))
			if _, err := b.ForceRelease(ctx, key); err != nil {
				t.Fatal(err)
			}
			if g := srv.MustDo(t, "GET", guard); g != strconv.FormatUint(next+100, 10) {
				t.Errorf("a guard above the floor was changed to %s", g)
			}

			// No guard key: none is created.
			if _, ok, err := b.Acquire(ctx, unguarded, "o", time.Minute); err != nil || !ok {
				t.Fatalf("Acquire: %v %v", ok, err)
			}
			if _, err := b.ForceRelease(ctx, unguarded); err != nil {
				t.Fatal(err)
			}
			if n := srv.MustDo(t, "EXISTS", lockKey(unguarded)+":guard"); n != "0" {
				t.Error("ForceRelease created a guard key where there was none")
			}
			// A free key: nothing changes.
			before := srv.MustDo(t, "GET", fenceKey(unguarded))
			st, err = b.ForceRelease(ctx, unguarded)
			if err != nil || st.Held {
				t.Errorf("ForceRelease of a free key = %+v, %v", st, err)
			}
			if after := srv.MustDo(t, "GET", fenceKey(unguarded)); after != before {
				t.Errorf("ForceRelease of a free key moved the fence from %s to %s", before, after)
			}
		})
	}
}

// TestListScan: List finds lock keys only — not fence keys, not other
// data, not strings without expiry — under a prefix whose characters SCAN
// would take for a pattern, through a Backend prefix, and in batches
// larger than one SCAN page.
func TestListScan(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 5*time.Minute)
	b := dial(t, srv, redis.WithPrefix("app:"))
	for _, k := range []string{"x*[1]", "x*?", "}brace", `\slash`} {
		if _, ok, err := b.Acquire(ctx, k, "o-"+k, time.Hour); err != nil || !ok {
			t.Fatalf("Acquire %q: %v %v", k, ok, err)
		}
	}
	for _, k := range []string{"xy", "x*", "x*other"} { // x* is free
		if _, ok, err := b.Acquire(ctx, k, "o", time.Hour); err != nil || !ok {
			t.Fatalf("Acquire %q: %v %v", k, ok, err)
		}
	}
	if _, err := b.Release(ctx, "x*", "o"); err != nil {
		t.Fatal(err)
	}
	srv.MustDo(t, "SET", "app:{x*junk}", "not a lock") // no expiry
	srv.MustDo(t, "HSET", "app:{x*hash}", "f", "v")
	srv.MustDo(t, "SET", "{x*[1]}", "other prefix", "PX", "60000")

	keys := func(prefix string, limit int) ([]string, bool) {
		t.Helper()
		states, more, err := b.List(ctx, prefix, limit)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		var ks []string
		for _, s := range states {
			ks = append(ks, s.Key)
			if s.Waiters != -1 || s.Holders[0].Owner == "" || s.Holders[0].TTL <= 0 || s.Holders[0].Token == 0 {
				t.Errorf("List entry %+v: want an owner, a TTL, a token, and Waiters -1", s)
			}
		}
		slices.Sort(ks)
		return ks, more
	}
	if got, more := keys("x*[", 10); !slices.Equal(got, []string{"x*[1]"}) || more {
		t.Errorf(`List("x*[") = %q %v, want ["x*[1]"]`, got, more)
	}
	if got, _ := keys("x*", 10); !slices.Equal(got, []string{"x*?", "x*[1]", "x*other"}) {
		t.Errorf(`List("x*") = %q, want x*?, x*[1], x*other`, got)
	}
	if got, _ := keys("}", 10); !slices.Equal(got, []string{"}brace"}) {
		t.Errorf(`List("}") = %q, want ["}brace"]`, got)
	}
	if got, _ := keys(`\`, 10); !slices.Equal(got, []string{`\slash`}) {
		t.Errorf(`List("\\") = %q, want ["\\slash"]`, got)
	}

	// More locks than one SCAN page and one inspect batch, taken by 50
	// goroutines at once (rueidis pipelines them), with a TTL no busy
	// machine outlasts.
	const n = 2500
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 50 {
		wg.Go(func() {
			for i := w; i < n; i += 50 {
				if _, ok, err := b.Acquire(ctx, "bulk:"+strconv.Itoa(i), "o", time.Hour); err != nil || !ok {
					errs <- fmt.Errorf("Acquire bulk:%d: %v %v", i, ok, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, more := keys("bulk:", n); len(got) != n || more {
		t.Errorf("List(bulk:, %d) = %d keys, more=%v; want all %d", n, len(got), more, n)
	}
	if got, more := keys("bulk:", n-1); len(got) != n-1 || !more {
		t.Errorf("List(bulk:, %d) = %d keys, more=%v; want %d and more", n-1, len(got), more, n-1)
	}
	if got, more := keys("bulk:1", 5); len(got) != 5 || !more {
		t.Errorf("List(bulk:1, 5) = %d keys, more=%v", len(got), more)
	}
}

// TestFairInspect: the fair view reports its queue's live waiters.
func TestFairInspect(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	f := fairOf(t, b)
	var in driver.Inspector = f
	const key = "fair:inspect"
	if _, ok, err := f.Acquire(ctx, key, "holder", time.Minute); err != nil || !ok {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.AcquireWait(wctx, key, "waiter", time.Minute)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := in.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 1 && st.Held && st.Holders[0].Owner == "holder" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect = %+v, want held by holder with 1 waiter", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	states, _, err := in.List(ctx, "fair:", 10)
	if err != nil || len(states) != 1 || states[0].Waiters != 1 {
		t.Errorf("List = %+v, %v; want the lock with its waiter", states, err)
	}
	if st, err := b.Inspect(ctx, key); err != nil || st.Waiters != -1 {
		t.Errorf("the plain view's Inspect = %+v, %v; want Waiters -1", st, err)
	}
}

// TestClusterInspect: on a cluster List scans every primary, and
// ForceRelease works on keys whose hash tag is easy to get wrong (the
// guard key must share the lock's slot).
func TestClusterInspect(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) })
	cl := testserver.StartRedisCluster(t)
	ctx := ctxFor(t, 2*time.Minute)
	for _, tc := range []struct {
		name string
		b    *redis.Backend
	}{
		{"rueidis", dialCluster(t, cl, redis.WithPrefix("rueidis:"))},
		{"go-redis", goRedisCluster(t, cl, redis.WithPrefix("go-redis:"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			for _, k := range trickyKeys {
				if _, ok, err := b.Acquire(ctx, k, "o", time.Hour); err != nil || !ok {
					t.Fatalf("Acquire %q: %v %v", k, ok, err)
				}
			}
			states, more, err := b.List(ctx, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range states {
				got = append(got, s.Key)
			}
			want := slices.Clone(trickyKeys)
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) || more {
				t.Errorf("List on the cluster = %q (more %v), want every tricky key %q", got, more, want)
			}
			for _, k := range trickyKeys {
				st, err := b.ForceRelease(ctx, k)
				if err != nil || !st.Held {
					t.Errorf("ForceRelease %q = %+v, %v", k, st, err)
				}
			}
			if states, _, err := b.List(ctx, "", 1000); err != nil || len(states) != 0 {
				t.Errorf("List after forced releases = %d states, %v; want none", len(states), err)
			}
		})
	}
}

// goRedisCluster returns a backend over a go-redis ClusterClient, closed
// when the test ends.
func goRedisCluster(t testing.TB, cl *testserver.RedisCluster, opts ...redis.Option) *redis.Backend {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	b, err := redis.NewGoRedis(c, opts...)
	if err != nil {
		t.Fatalf("NewGoRedis: %v", err)
	}
	return b
}
