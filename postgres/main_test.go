package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/postgres"
)

// srv is the package's one server, started by TestMain: initdb costs a
// second or two.
var srv *testserver.Postgres

func TestMain(m *testing.M) {
	locktest.RunChild()
	testserver.Main(m, testserver.SharedPostgres(&srv))
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

func connConfig(t testing.TB, srv *testserver.Postgres) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// dial returns a backend closed when the test ends.
func dial(t testing.TB, srv *testserver.Postgres, opts ...postgres.Option) *postgres.Backend {
	t.Helper()
	return dialConfig(t, connConfig(t, srv), opts...)
}

func dialConfig(t testing.TB, cfg *pgx.ConnConfig, opts ...postgres.Option) *postgres.Backend {
	t.Helper()
	b, err := postgres.Dial(ctxFor(t, 10*time.Second), cfg, opts...)
	if err != nil {
		t.Fatalf("postgres.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// sqlConn is a plain connection of the test's own, for inspection.
func sqlConn(t testing.TB, srv *testserver.Postgres) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxFor(t, 10*time.Second), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
