package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// startNodes starts n independent redis-server processes, stopped when
// the test ends.
func startNodes(t testing.TB, n int) []*testserver.Redis {
	t.Helper()
	srvs := make([]*testserver.Redis, n)
	for i := range srvs {
		srvs[i] = testserver.StartRedis(t)
	}
	return srvs
}

func addrs(srvs []*testserver.Redis) []string {
	a := make([]string, len(srvs))
	for i, s := range srvs {
		a[i] = s.Addr()
	}
	return a
}

// redlockURL is the turnstile URL of a Redlock over srvs.
func redlockURL(srvs []*testserver.Redis, query string) string {
	u := "redlock://" + strings.Join(addrs(srvs), ",")
	if query != "" {
		u += "?" + query
	}
	return u
}

// dialRedlock returns a Redlock over srvs that owns its connections,
// closed when the test ends.
func dialRedlock(t testing.TB, srvs []*testserver.Redis, opts ...redlock.Option) *redlock.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A node timeout a healthy loopback node meets on a busy machine,
	// where the default 50 ms has been missed; opts may set another.
	opts = append([]redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}, opts...)
	b, err := redlock.Dial(ctx, addrs(srvs), rueidis.ClientOption{}, opts...)
	if err != nil {
		t.Fatalf("redlock.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// redisNodes connects one redis backend to each server, closed when the
// test ends.
func redisNodes(t testing.TB, srvs []*testserver.Redis, opts ...redis.Option) []driver.Backend {
	t.Helper()
	nodes := make([]driver.Backend, len(srvs))
	for i, s := range srvs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{s.Addr()}}, opts...)
		cancel()
		if err != nil {
			t.Fatalf("redis.Dial: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		nodes[i] = b
	}
	return nodes
}

// lockKey is the Redis key of the lock on key (no prefix), as package
// redis documents it.
func lockKey(key string) string {
	if strings.HasPrefix(key, "}") || strings.HasPrefix(key, `\`) {
		key = `\` + key
	}
	return "{" + key + "}"
}

// evictAll removes the lock on key from every server behind its holder's
// back.
func evictAll(t testing.TB, srvs []*testserver.Redis, key string) {
	t.Helper()
	for _, s := range srvs {
		if _, err := s.Do("DEL", lockKey(key)); err != nil {
			t.Fatalf("evict %s on %s: %v", key, s.Addr(), err)
		}
	}
}

// exists reports whether srv holds the lock key of key.
func exists(t testing.TB, srv *testserver.Redis, key string) bool {
	t.Helper()
	r, err := srv.Do("EXISTS", lockKey(key))
	if err != nil {
		t.Fatalf("EXISTS on %s: %v", srv.Addr(), err)
	}
	return r == "1"
}
