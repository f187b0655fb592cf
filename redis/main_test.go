package redis_test

import (
	"context"
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

func TestMain(m *testing.M) {
	locktest.RunChild()
	// TestDialFailsInTime: a failed rueidis.NewClient leaves its topology
	// refresh behind.
	testserver.Main(m, testserver.IgnoreGoroutines(testserver.IgnoreRueidisRefresh))
}

// dial returns a backend with a client of its own, closed when the test
// ends.
func dial(t testing.TB, srv *testserver.Redis, opts ...redis.Option) *redis.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{srv.Addr()}}, opts...)
	if err != nil {
		t.Fatalf("redis.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// newClient returns a Client over b, closed when the test ends.
func newClient(t testing.TB, b driver.Backend, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	c, err := turnstile.New(b, opts...)
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rueidisClient returns a client of the test's own, closed when it ends.
func rueidisClient(t testing.TB, srv *testserver.Redis) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// lockKey is the documented Redis key of the lock on key (no prefix).
func lockKey(key string) string {
	if strings.HasPrefix(key, "}") || strings.HasPrefix(key, `\`) {
		key = `\` + key
	}
	return "{" + key + "}"
}

func fenceKey(key string) string   { return lockKey(key) + ":fence" }
func channelKey(key string) string { return lockKey(key) + ":released" }

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// startRedis starts a server of the test's own and returns it with a
// context that ends after a minute, or when the test ends.
func startRedis(t testing.TB) (*testserver.Redis, context.Context) {
	t.Helper()
	srv := testserver.StartRedis(t)
	return srv, ctxFor(t, time.Minute)
}

// startDialled starts a server of the test's own and returns it with a
// backend dialled to it (dial).
func startDialled(t testing.TB, opts ...redis.Option) (*testserver.Redis, *redis.Backend) {
	t.Helper()
	srv := testserver.StartRedis(t)
	return srv, dial(t, srv, opts...)
}

// goRedisBackend returns a backend over a go-redis client closed when the
// test ends.
func goRedisBackend(t testing.TB, srv *testserver.Redis) *redis.Backend {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	b, err := redis.NewGoRedis(c)
	if err != nil {
		t.Fatalf("NewGoRedis: %v", err)
	}
	return b
}

// eachLibrary runs test as a subtest, named after the client library,
// with a backend on srv over rueidis and one over go-redis, and a context
// that ends after a minute or when the subtest ends.
func eachLibrary(t *testing.T, srv *testserver.Redis, test func(t *testing.T, ctx context.Context, name string, b *redis.Backend)) {
	t.Helper()
	for name, b := range map[string]*redis.Backend{"rueidis": dial(t, srv), "go-redis": goRedisBackend(t, srv)} {
		t.Run(name, func(t *testing.T) { test(t, ctxFor(t, time.Minute), name, b) })
	}
}
