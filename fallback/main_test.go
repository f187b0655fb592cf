package fallback_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/postgres"
	"github.com/turnstilelock/turnstile/redis"
)

// pg is the package's one PostgreSQL server, started by TestMain: initdb
// costs a second or two.
var pg *testserver.Postgres

func TestMain(m *testing.M) {
	locktest.RunChild()
	// rueidis schedules a topology refresh when a connection breaks (the
	// killed Redis).
	testserver.Main(m, testserver.SharedPostgres(&pg), testserver.IgnoreGoroutines(testserver.IgnoreRueidisRefresh))
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

func dialRedis(t testing.TB, srv *testserver.Redis) *redis.Backend {
	t.Helper()
	b, err := redis.Dial(ctxFor(t, 10*time.Second), rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		t.Fatalf("redis.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func dialPostgres(t testing.TB) *postgres.Backend {
	t.Helper()
	cfg, err := pgx.ParseConfig(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgres.Dial(ctxFor(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("postgres.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
