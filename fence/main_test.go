package fence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// pg is the package's one PostgreSQL server, started by TestMain: initdb
// costs a second or two. Tests use resources and tables of their own.
var pg *testserver.Postgres

func TestMain(m *testing.M) {
	s, err := pgproc.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pg = &testserver.Postgres{Server: s}
	code := m.Run()
	s.Kill()
	if code == 0 {
		if err := goleak.Find(); err != nil {
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

// pool returns a pool on the package's server with the fence table
// migrated, closed when the test ends.
func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(ctxFor(t, 10*time.Second), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := fence.Migrate(ctxFor(t, 10*time.Second), p); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return p
}

// rueidisClient returns a client of a fresh redis-server, both stopped
// when the test ends.
func rueidisClient(t testing.TB) (rueidis.Client, *testserver.Redis) {
	t.Helper()
	srv := testserver.StartRedis(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c, srv
}

// wantStale fails the test unless err is a *StaleTokenError for resource
// with both tokens, matching turnstile.ErrStaleToken.
func wantStale(t testing.TB, err error, resource string, token, last uint64) {
	t.Helper()
	if !errors.Is(err, turnstile.ErrStaleToken) {
		t.Fatalf("err = %v, want turnstile.ErrStaleToken", err)
	}
	var se *fence.StaleTokenError
	if !errors.As(err, &se) {
		t.Fatalf("err = %T %v, want *fence.StaleTokenError", err, err)
	}
	if se.Resource != resource || se.Token != token || se.Last != last {
		t.Fatalf("StaleTokenError = %+v, want resource %q token %d last %d", *se, resource, token, last)
	}
	want := fmt.Sprintf("stale fencing token %d for %q: storage already accepted %d", token, resource, last)
	if got := err.Error(); !strings.Contains(got, want) {
		t.Fatalf("message %q does not say %q", got, want)
	}
}
