package fallback_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/pgproc"
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
	s, err := pgproc.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pg = &testserver.Postgres{Server: s}
	code := m.Run()
	s.Kill()
	if code == 0 {
		if err := goleak.Find(
			// rueidis schedules a topology refresh when a connection
			// breaks (the killed Redis) that sleeps and then ends.
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

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
