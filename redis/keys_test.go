package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestKeysWithBraces: keys that contain hash tags of their own, or begin
// with '}', are stored under the documented names, and the lock, fence and
// channel of each share one Redis Cluster slot. (The test server is not a
// cluster, where CLUSTER KEYSLOT is refused, so the slot is computed here
// as the cluster specification defines it.)
func TestKeysWithBraces(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	for _, k := range []string{
		"lock:inventory:{w1}:{p9}",
		"lock:inventory:12345",
		"}starts-with-brace",
		`\starts-with-backslash`,
		"{}",
		"{",
		"}",
	} {
		for _, name := range []string{fenceKey(k), channelKey(k)} {
			if clusterslot.Of(name) != clusterslot.Of(lockKey(k)) {
				t.Errorf("key %q: %q is in slot %d, the lock %q in slot %d", k, name, clusterslot.Of(name), lockKey(k), clusterslot.Of(lockKey(k)))
			}
		}
		tok, ok, err := b.Acquire(ctx, k, "o", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire %q: ok=%v err=%v", k, ok, err)
		}
		if got := srv.MustDo(t, "GET", lockKey(k)); got != "o" {
			t.Errorf("key %q: %q holds %q, want the owner", k, lockKey(k), got)
		}
		if got := srv.MustDo(t, "GET", fenceKey(k)); got != fmt.Sprint(tok) {
			t.Errorf("key %q: %q holds %q, want the token %d", k, fenceKey(k), got, tok)
		}
		if ok, err := b.Extend(ctx, k, "o", time.Minute); !ok || err != nil {
			t.Errorf("extend %q: ok=%v err=%v", k, ok, err)
		}
		if ok, err := b.Release(ctx, k, "o"); !ok || err != nil {
			t.Errorf("release %q: ok=%v err=%v", k, ok, err)
		}
	}
	// The escape keeps distinct keys distinct.
	if lockKey("}x") == lockKey(`\}x`) || lockKey(`\x`) == lockKey("x") {
		t.Fatal("escaped names collide")
	}
}

// TestPrefix: WithPrefix goes in front of every name.
func TestPrefix(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := dial(t, srv, redis.WithPrefix("app:"))
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := b.Acquire(ctx, "k", "o", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	if got := srv.MustDo(t, "GET", "app:{k}"); got != "o" {
		t.Fatalf("app:{k} holds %q", got)
	}
	if got := srv.MustDo(t, "EXISTS", "app:{k}:fence"); got != "1" {
		t.Fatalf("app:{k}:fence missing")
	}
	if got := srv.MustDo(t, "EXISTS", "{k}"); got != "0" {
		t.Fatalf("unprefixed key written")
	}
}

// TestReleasePublishes: a release is published on the key's shard channel
// (Redis 7.0 and later), a refused release is not.
func TestReleasePublishes(t *testing.T) {
	srv, b := startDialled(t)
	sub := rueidisClient(t, srv)
	ctx := ctxFor(t, time.Minute)
	const k = "lock:inventory:{w1}:{p9}"

	got := make(chan string, 4)
	subscribed := make(chan struct{})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		hooked := rueidis.WithOnSubscriptionHook(rctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "ssubscribe" {
				close(subscribed)
			}
		})
		done <- sub.Receive(hooked, sub.B().Ssubscribe().Channel(channelKey(k)).Build(), func(m rueidis.PubSubMessage) {
			got <- m.Channel
		})
	}()
	defer func() { stop(); <-done }()
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("no subscription confirmation")
	}

	if _, ok, err := b.Acquire(ctx, k, "o", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	if ok, err := b.Release(ctx, k, "someone-else"); ok || err != nil {
		t.Fatalf("release by a non-owner: ok=%v err=%v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, k, "waiter", time.Minute); ok || err != nil {
		t.Fatalf("a second owner's acquire: ok=%v err=%v, want refused", ok, err)
	}
	if ok, err := b.Release(ctx, k, "o"); !ok || err != nil {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	select {
	case ch := <-got:
		if ch != channelKey(k) {
			t.Fatalf("message on %q, want %q", ch, channelKey(k))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no message on the release channel")
	}
	select {
	case <-got:
		t.Fatal("a refused release was published too")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestExtendMany: one batch renews the leases still held and refuses the
// rest, in request order, on both client libraries.
func TestExtendMany(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		const n = 1000
		reqs := make([]driver.ExtendRequest, n)
		for i := range reqs {
			reqs[i] = driver.ExtendRequest{Key: fmt.Sprintf("%s:batch:%d", name, i), Owner: "o", TTL: time.Minute}
			if i%3 == 0 {
				continue // never acquired
			}
			if _, ok, err := b.Acquire(ctx, reqs[i].Key, "o", time.Second); !ok || err != nil {
				t.Fatalf("acquire: ok=%v err=%v", ok, err)
			}
			if i%3 == 1 {
				reqs[i].Owner = "someone-else"
			}
		}
		for i, r := range b.ExtendMany(ctx, reqs) {
			if want := i%3 == 2; r.OK != want || r.Err != nil {
				t.Fatalf("request %d: %+v, want OK=%v", i, r, want)
			}
		}
		if pttl := srv.MustDo(t, "PTTL", lockKey(reqs[2].Key)); len(pttl) < 5 {
			t.Fatalf("renewed lock PTTL %s ms, want about a minute", pttl)
		}
		if got := b.ExtendMany(ctx, nil); len(got) != 0 {
			t.Fatalf("empty batch = %v", got)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		for _, r := range b.ExtendMany(cctx, reqs[:3]) {
			if r.OK || r.Err == nil {
				t.Fatalf("cancelled batch: %+v", r)
			}
		}
	})
}

func TestName(t *testing.T) {
	srv := testserver.StartRedis(t)
	want := "redis " + srv.Addr()
	if got := dial(t, srv).Name(); got != want {
		t.Errorf("rueidis Name() = %q, want %q", got, want)
	}
	if got := goRedisBackend(t, srv).Name(); got != want {
		t.Errorf("go-redis Name() = %q, want %q", got, want)
	}
	if !strings.HasPrefix(want, "redis 127.0.0.1:") {
		t.Errorf("unexpected address %q", want)
	}
}
