package fence_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func newRedis(t testing.TB, c rueidis.Client, opts ...fence.Option) *fence.Redis {
	t.Helper()
	g, err := fence.NewRedis(c, opts...)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	return g
}

// redisGuard starts a Redis server and returns a guard with opts over a
// client of its own, and the server.
func redisGuard(t testing.TB, opts ...fence.Option) (*fence.Redis, *testserver.Redis) {
	t.Helper()
	c, srv := rueidisClient(t)
	return newRedis(t, c, opts...), srv
}

func TestRedisTokens(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	const r = "inventory:1"
	key := fence.DataKey(r, "owner")

	if last, err := g.Last(ctx, r); err != nil || last != 0 {
		t.Fatalf("Last before any write = %d, %v; want 0", last, err)
	}
	if err := g.Set(ctx, r, 43, key, "v43"); err != nil {
		t.Fatalf("first write: %v", err)
	}
	wantStale(t, g.Set(ctx, r, 42, key, "v42"), r, 42, 43)
	wantStale(t, g.Set(ctx, r, 43, key, "again"), r, 43, 43)
	if got := srv.MustDo(t, "GET", key); got != "v43" {
		t.Fatalf("value after stale writes = %q, want v43", got)
	}
	if err := g.Set(ctx, r, 44, key, "v44"); err != nil {
		t.Fatalf("larger token: %v", err)
	}
	if got := srv.MustDo(t, "GET", key); got != "v44" {
		t.Fatalf("value = %q, want v44", got)
	}
	if got := srv.MustDo(t, "GET", fence.GuardKey(r)); got != "44" {
		t.Fatalf("guard key %s = %q, want 44", fence.GuardKey(r), got)
	}
	if ttl := srv.MustDo(t, "PTTL", fence.GuardKey(r)); ttl != "-1" {
		t.Fatalf("guard key PTTL %s, want -1 (no expiry)", ttl)
	}

	stock := fence.DataKey(r, "stock")
	srv.MustDo(t, "SET", stock, "10")
	n, err := g.IncrBy(ctx, r, 45, stock, -3)
	if err != nil || n != 7 {
		t.Fatalf("IncrBy = %d, %v; want 7", n, err)
	}
	_, err = g.IncrBy(ctx, r, 44, stock, -3)
	wantStale(t, err, r, 44, 45)
	if got := srv.MustDo(t, "GET", stock); got != "7" {
		t.Fatalf("stock after a stale IncrBy = %s, want 7", got)
	}
	if n, err := g.IncrBy(ctx, r, 46, fence.DataKey(r, "new"), 5); err != nil || n != 5 {
		t.Fatalf("IncrBy on a missing key = %d, %v; want 5", n, err)
	}
	if last, err := g.Last(ctx, r); err != nil || last != 46 {
		t.Fatalf("Last = %d, %v; want 46", last, err)
	}
}

func TestRedisAllowSameToken(t *testing.T) {
	g, srv := redisGuard(t, fence.AllowSameToken())
	ctx := ctxFor(t, 30*time.Second)
	const r = "order:7"
	key := fence.DataKey(r, "n")
	for i := range 3 {
		if n, err := g.IncrBy(ctx, r, 7, key, 1); err != nil || n != int64(i+1) {
			t.Fatalf("IncrBy with the same token = %d, %v; want %d", n, err, i+1)
		}
	}
	_, err := g.IncrBy(ctx, r, 6, key, 1)
	wantStale(t, err, r, 6, 7)
	if got := srv.MustDo(t, "GET", key); got != "3" {
		t.Fatalf("counter = %s, want 3", got)
	}
}

// TestRedisExactTokens: the script compares tokens exactly over the whole
// uint64 range, where Lua's doubles cannot tell neighbours apart.
func TestRedisExactTokens(t *testing.T) {
	g, _ := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	for i, tc := range []struct{ last, token uint64 }{
		{9, 10},
		{10, 9},
		{1 << 53, 1<<53 + 1},
		{1<<53 + 1, 1 << 53},
		{12345678901234567890, 12345678901234567891},
		{12345678901234567891, 12345678901234567890},
		{12345678911234567890, 12345678901234567891}, // differs above the last ten digits
		{math.MaxUint64 - 1, math.MaxUint64},
		{math.MaxUint64, math.MaxUint64 - 1},
		{math.MaxInt64, math.MaxInt64 + 1},
	} {
		r := "exact:" + strconv.Itoa(i)
		key := fence.DataKey(r, "v")
		if err := g.Set(ctx, r, tc.last, key, "last"); err != nil {
			t.Fatalf("%d: first write: %v", tc.last, err)
		}
		err := g.Set(ctx, r, tc.token, key, "token")
		if tc.token > tc.last {
			if err != nil {
				t.Fatalf("token %d after %d: %v", tc.token, tc.last, err)
			}
		} else {
			wantStale(t, err, r, tc.token, tc.last)
		}
		if last, err := g.Last(ctx, r); err != nil || last != max(tc.last, tc.token) {
			t.Fatalf("Last = %d, %v; want %d", last, err, max(tc.last, tc.token))
		}
	}
}

// TestRedisConcurrentWriters: 64 goroutines write with random tokens; the
// value left is the largest token's.
func TestRedisConcurrentWriters(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	const r = "race"
	key, count := fence.DataKey(r, "v"), fence.DataKey(r, "accepted")

	tokens := make([]uint64, 64)
	var maxTok uint64
	for i := range tokens {
		tokens[i] = rand.Uint64N(1<<62) + 1
		maxTok = max(maxTok, tokens[i])
	}
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() {
			// Two writes per token, the second with the same token: it
			// must be refused, as must every token below an accepted one.
			if errs[i] = g.Set(ctx, r, tok, key, strconv.FormatUint(tok, 10)); errs[i] == nil {
				_, err := g.IncrBy(ctx, r, tok, count, 1)
				if !errors.Is(err, fence.ErrStaleToken) {
					errs[i] = errors.Join(errors.New("same token accepted twice"), err)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, fence.ErrStaleToken) {
			t.Fatal(err)
		}
	}
	if got := srv.MustDo(t, "GET", key); got != strconv.FormatUint(maxTok, 10) {
		t.Fatalf("value %s, want the largest token's %d", got, maxTok)
	}
	if last, err := g.Last(ctx, r); err != nil || last != maxTok {
		t.Fatalf("Last = %d, %v; want %d", last, err, maxTok)
	}
	if got, _ := srv.Do("EXISTS", count); got != "0" {
		t.Fatal("an IncrBy with an already used token was applied")
	}
}

// TestRedisFailedWriteRecordsNothing: a write Redis refuses leaves the
// guard as it was.
func TestRedisFailedWriteRecordsNothing(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	const r = "failing"
	key := fence.DataKey(r, "text")
	srv.MustDo(t, "SET", key, "not a number")
	if _, err := g.IncrBy(ctx, r, 5, key, 1); err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("IncrBy on text: %v, want Redis's error", err)
	}
	if last, err := g.Last(ctx, r); err != nil || last != 0 {
		t.Fatalf("Last after a failed write = %d, %v; want 0", last, err)
	}
	if got := srv.MustDo(t, "GET", key); got != "not a number" {
		t.Fatalf("value = %q", got)
	}
}

func TestRedisGarbledGuardKey(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	const r = "garbled"
	for _, v := range []string{"abc", "012", "-5", "123456789012345678901"} {
		srv.MustDo(t, "SET", fence.GuardKey(r), v)
		err := g.Set(ctx, r, 1<<62, fence.DataKey(r, "v"), "x")
		if err == nil || errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), "holds no token") {
			t.Fatalf("guard key %q: Set = %v, want an error saying it holds no token", v, err)
		}
		if _, err := g.Last(ctx, r); err == nil {
			t.Fatalf("guard key %q: Last gave no error", v)
		}
	}
	if got, _ := srv.Do("EXISTS", fence.DataKey(r, "v")); got != "0" {
		t.Fatal("a write went through a garbled guard")
	}
}

// TestRedisScriptCacheFlushed: the write still works after the server
// forgot its scripts (restart, SCRIPT FLUSH, failover).
func TestRedisScriptCacheFlushed(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	if err := g.Set(ctx, "r", 1, fence.DataKey("r", "v"), "a"); err != nil {
		t.Fatal(err)
	}
	srv.MustDo(t, "SCRIPT", "FLUSH")
	if err := g.Set(ctx, "r", 2, fence.DataKey("r", "v"), "b"); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
}

func TestRedisKeys(t *testing.T) {
	for _, tc := range []struct{ resource, guard, data string }{
		{"inventory:1", "{inventory:1}:guard", "{inventory:1}:stock"},
		{"lock:{w1}:p9", "{lock:{w1}:p9}:guard", "{lock:{w1}:p9}:stock"},
		{"}x", `{\}x}:guard`, `{\}x}:stock`},
		{`\x`, `{\\x}:guard`, `{\\x}:stock`},
	} {
		if got := fence.GuardKey(tc.resource); got != tc.guard {
			t.Errorf("GuardKey(%q) = %q, want %q", tc.resource, got, tc.guard)
		}
		if got := fence.DataKey(tc.resource, "stock"); got != tc.data {
			t.Errorf("DataKey(%q, stock) = %q, want %q", tc.resource, got, tc.data)
		}
	}
}

// keyPrefix is a lock backend whose keys have the prefix it is.
type keyPrefix string

func (p keyPrefix) KeyPrefix() string { return string(p) }

// pointerPrefix is one as a pointer, which may be nil.
type pointerPrefix struct{ p string }

func (p *pointerPrefix) KeyPrefix() string { return p.p }

// TestRedisKeysOf: with WithKeysOf, the guard's keys and its data keys
// lie under the backend's prefix, and a key of a lock under that prefix
// (or any other) is refused as data.
func TestRedisKeysOf(t *testing.T) {
	g, srv := redisGuard(t, fence.WithKeysOf(keyPrefix("app:")))
	ctx := ctxFor(t, 30*time.Second)
	if got := g.GuardKey("}r"); got != `app:{\}r}:guard` {
		t.Errorf("GuardKey = %q", got)
	}
	key := g.DataKey("r", "stock")
	if key != "app:{r}:stock" {
		t.Errorf("DataKey = %q", key)
	}
	if err := g.Set(ctx, "r", 7, key, "v"); err != nil {
		t.Fatal(err)
	}
	if got := srv.MustDo(t, "GET", "app:{r}:guard"); got != "7" {
		t.Errorf("app:{r}:guard = %q, want 7", got)
	}
	if got := srv.MustDo(t, "EXISTS", fence.GuardKey("r")); got != "0" {
		t.Errorf("the guard wrote the unprefixed guard key")
	}
	if last, err := g.Last(ctx, "r"); err != nil || last != 7 {
		t.Errorf("Last = %d, %v; want 7", last, err)
	}
	for _, k := range []string{g.GuardKey("r"), g.DataKey("r", "fence"), g.DataKey("r", "writer"), "app:{r}", fence.GuardKey("r")} {
		if err := g.Set(ctx, "r", 8, k, "v"); !errors.Is(err, turnstile.ErrInvalidKey) {
			t.Errorf("Set of %q = %v, want ErrInvalidKey", k, err)
		}
	}
}

func TestRedisBadInput(t *testing.T) {
	c, srv := rueidisClient(t)
	g := newRedis(t, c)
	ctx := context.Background()
	var nilCtx context.Context
	var nilGuard *fence.Redis
	srv.MustDo(t, "CONFIG", "RESETSTAT")
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"empty resource", func() error { return g.Set(ctx, "", 1, "k", "v") }, turnstile.ErrInvalidKey},
		{"long resource", func() error { return g.Set(ctx, strings.Repeat("r", turnstile.MaxKeyLen+1), 1, "k", "v") }, turnstile.ErrInvalidKey},
		{"zero token", func() error { return g.Set(ctx, "r", 0, "k", "v") }, fence.ErrInvalidToken},
		{"empty key", func() error { return g.Set(ctx, "r", 1, "", "v") }, turnstile.ErrInvalidKey},
		{"the lock key", func() error { return g.Set(ctx, "r", 1, "{r}", "v") }, turnstile.ErrInvalidKey},
		{"the lock's fence key", func() error { return g.Set(ctx, "r", 1, "{r}:fence", "v") }, turnstile.ErrInvalidKey},
		{"the release channel", func() error { return g.Set(ctx, "r", 1, "{r}:released", "v") }, turnstile.ErrInvalidKey},
		{"the guard key", func() error { return g.Set(ctx, "r", 1, fence.GuardKey("r"), "v") }, turnstile.ErrInvalidKey},
		{"another resource's guard key", func() error { return g.Set(ctx, "r", 1, fence.GuardKey("other"), "v") }, turnstile.ErrInvalidKey},
		{"the start marker", func() error { _, err := g.IncrBy(ctx, "r", 1, "{r}:started", 1); return err }, turnstile.ErrInvalidKey},
		{"the writer", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "writer"), "v") }, turnstile.ErrInvalidKey},
		{"the readers", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "readers"), "v") }, turnstile.ErrInvalidKey},
		{"the writers waiting", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "writers"), "v") }, turnstile.ErrInvalidKey},
		{"the semaphore", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "semaphore"), "v") }, turnstile.ErrInvalidKey},
		{"the semaphore's permits", func() error {
			_, err := g.IncrBy(ctx, "r", 1, fence.DataKey("r", "semaphore:permits"), 1)
			return err
		}, turnstile.ErrInvalidKey},
		{"the queue", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "queue"), "v") }, turnstile.ErrInvalidKey},
		{"the queue's heartbeats", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "queue:alive"), "v") }, turnstile.ErrInvalidKey},
		{"the queue's counter", func() error {
			_, err := g.IncrBy(ctx, "r", 1, fence.DataKey("r", "queue:seq"), 1)
			return err
		}, turnstile.ErrInvalidKey},
		{"the reentrant lock", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "reentrant"), "v") }, turnstile.ErrInvalidKey},
		{"another resource's writer", func() error { return g.Set(ctx, "r", 1, "{other}:writer", "v") }, turnstile.ErrInvalidKey},
		{"another prefix's lock", func() error { return g.Set(ctx, "r", 1, "app:{r}:reentrant", "v") }, turnstile.ErrInvalidKey},
		{"the fence key of the lock on r}:x", func() error { return g.Set(ctx, "r", 1, fence.DataKey("r", "x}:fence"), "v") }, turnstile.ErrInvalidKey},
		{"IncrBy zero token", func() error { _, err := g.IncrBy(ctx, "r", 0, "k", 1); return err }, fence.ErrInvalidToken},
		{"nil context", func() error { return g.Set(nilCtx, "r", 1, "k", "v") }, turnstile.ErrInvalidOption},
		{"nil guard", func() error { return nilGuard.Set(ctx, "r", 1, "k", "v") }, turnstile.ErrInvalidOption},
		{"Last empty resource", func() error { _, err := g.Last(ctx, ""); return err }, turnstile.ErrInvalidKey},
		{"Last nil context", func() error { _, err := g.Last(nilCtx, "r"); return err }, turnstile.ErrInvalidOption},
		{"nil client", func() error { _, err := fence.NewRedis(nil); return err }, turnstile.ErrInvalidOption},
		{"nil option", func() error { _, err := fence.NewRedis(c, nil); return err }, turnstile.ErrInvalidOption},
		{"table option", func() error { _, err := fence.NewRedis(c, fence.WithTable("t")); return err }, turnstile.ErrInvalidOption},
		{"keys of nil", func() error { _, err := fence.NewRedis(c, fence.WithKeysOf(nil)); return err }, turnstile.ErrInvalidOption},
		{"keys of a nil pointer", func() error { _, err := fence.NewRedis(c, fence.WithKeysOf((*pointerPrefix)(nil))); return err }, turnstile.ErrInvalidOption},
		{"keys under a prefix with a brace", func() error { _, err := fence.NewRedis(c, fence.WithKeysOf(keyPrefix("a{"))); return err }, turnstile.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if stats := srv.MustDo(t, "INFO", "commandstats"); strings.Contains(stats, "cmdstat_eval") || strings.Contains(stats, "cmdstat_get") {
		t.Fatalf("bad input reached the server:\n%s", stats)
	}
}
