package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestRestartQuarantine: with a quarantine, a server refuses every lock
// until the quarantine has passed since its process started — after a
// fresh start and after a restart that lost a held lock — and then grants
// as usual. Without one it never refuses and keeps no marker.
func TestRestartQuarantine(t *testing.T) {
	const q = 1500 * time.Millisecond
	ctx := ctxFor(t, time.Minute)
	beforeStart := time.Now()
	srv := testserver.StartRedis(t)
	afterStart := time.Now()
	b := dial(t, srv, redis.WithRestartQuarantine(q))
	if got := b.RestartQuarantine(); got != q {
		t.Fatalf("RestartQuarantine() = %v, want %v", got, q)
	}

	granted := acquireAfterQuarantine(t, b, "{q}:fresh", "a", q)
	if granted.Before(beforeStart.Add(q)) {
		t.Fatalf("a fresh server granted a lock %v after it started, before the quarantine %v", granted.Sub(beforeStart), q)
	}
	if late := granted.Sub(afterStart.Add(q)); late > time.Second+500*time.Millisecond {
		t.Fatalf("the quarantine lasted %v too long (uptime has a resolution of 1 s)", late)
	}
	if n := markers(t, srv); n != 1 {
		t.Fatalf("%d start markers for one slot, want 1", n)
	}

	// A restart without persistence while "a" holds a lock: nobody may take
	// it before the quarantine, which is at least the lock's TTL, has passed.
	// The key shares the slot, and so the marker, of the first one: a key
	// of another slot may see the start up to a second later, as uptime is
	// counted in whole seconds.
	if _, ok, err := b.Acquire(ctx, "{q}:held", "a", q); !ok || err != nil {
		t.Fatalf("acquire before restart: ok=%v err=%v", ok, err)
	}
	restarted := time.Now()
	srv.Restart()
	granted = acquireAfterQuarantine(t, b, "{q}:held", "b", q)
	if granted.Before(restarted.Add(q)) {
		t.Fatalf("a restarted server granted a lost lock %v after the restart, before the quarantine %v", granted.Sub(restarted), q)
	}

	// Without a quarantine nothing is refused and no marker is written.
	srv.Restart()
	plain := dial(t, srv)
	if _, ok, err := plain.Acquire(ctx, "q:plain", "a", time.Minute); !ok || err != nil {
		t.Fatalf("acquire without quarantine right after a restart: ok=%v err=%v", ok, err)
	}
	if n := markers(t, srv); n != 0 {
		t.Fatalf("%d start markers without a quarantine, want 0", n)
	}
}

// acquireAfterQuarantine retries Acquire while the server is quarantined
// or reconnecting, and returns when it granted the lock.
func acquireAfterQuarantine(t *testing.T, b *redis.Backend, key, owner string, q time.Duration) time.Time {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	sawQuarantine := false
	for {
		_, ok, err := b.Acquire(ctx, key, owner, q)
		var qe *redis.QuarantineError
		switch {
		case err == nil && ok:
			if !sawQuarantine {
				t.Fatalf("%s: granted without ever being refused for the quarantine", key)
			}
			return time.Now()
		case err == nil:
			t.Fatalf("%s: refused as held; a restart without persistence loses the lock", key)
		case errors.As(err, &qe):
			if !errors.Is(err, redis.ErrQuarantined) || qe.Left <= 0 || qe.Left > q {
				t.Fatalf("quarantine error %v: Left %v outside (0, %v] or not ErrQuarantined", err, qe.Left, q)
			}
			sawQuarantine = true
		case ctx.Err() != nil:
			t.Fatalf("%s: %v", key, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// markers counts the start markers on srv.
func markers(t *testing.T, srv *testserver.Redis) int {
	t.Helper()
	reply := srv.MustDo(t, "EVAL", "return #redis.call('KEYS', '*:started')", "0")
	n, err := strconv.Atoi(reply)
	if err != nil {
		t.Fatalf("count markers: %q", reply)
	}
	return n
}

func TestBadQuarantine(t *testing.T) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}, ForceSingleClient: true})
	if c == nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	defer c.Close()
	for _, d := range []time.Duration{-time.Second, 25 * time.Hour} {
		if _, err := redis.New(c, redis.WithRestartQuarantine(d)); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("WithRestartQuarantine(%v) = %v, want ErrInvalidOption", d, err)
		}
	}
}

// TestQuarantineOnCluster: every script's keys must share a slot on Redis
// Cluster; the start marker is per slot, so the acquire script runs for
// keys in every kind of slot, refuses while quarantined, and grants after.
func TestQuarantineOnCluster(t *testing.T) {
	cl := testserver.StartRedisCluster(t)
	ctx := ctxFor(t, time.Minute)
	// A go-redis ClusterClient: rueidis's cluster client closes replaced
	// connections from a goroutine that sleeps 5 s after a topology
	// refresh, which the leak check would report.
	dialQ := func(q time.Duration) *redis.Backend {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs()})
		t.Cleanup(func() { _ = c.Close() })
		b, err := redis.NewGoRedis(c, redis.WithRestartQuarantine(q), redis.WithPrefix("qc:"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	keys := []string{"lock:inventory:12345", "lock:inventory:{w1}:{p9}", "{}", "}{", `\`, "a{b", "{{a}}", "lock:재고:{창고}", strings.Repeat("k", 500)}
	for i := range 200 {
		keys = append(keys, "spread:"+strconv.Itoa(i))
	}

	long := dialQ(time.Hour)
	for _, k := range keys {
		if _, ok, err := long.Acquire(ctx, k, "a", time.Minute); ok || !errors.Is(err, redis.ErrQuarantined) {
			t.Fatalf("key %.40q on a cluster started just now with a 1h quarantine: ok=%v err=%v, want ErrQuarantined", k, ok, err)
		}
	}
	short := dialQ(time.Millisecond)
	for _, k := range keys {
		tok, ok, err := short.Acquire(ctx, k, "a", time.Minute)
		if err != nil || !ok || tok == 0 {
			t.Fatalf("key %.40q with a 1ms quarantine: token %d ok=%v err=%v", k, tok, ok, err)
		}
		if ok, err := short.Release(context.Background(), k, "a"); !ok || err != nil {
			t.Fatalf("release %.40q: ok=%v err=%v", k, ok, err)
		}
	}
}
