package fence_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// pg is the package's one PostgreSQL server, started by TestMain: initdb
// costs a second or two. Tests use resources and tables of their own.
var pg *testserver.Postgres

func TestMain(m *testing.M) {
	testserver.Main(m, testserver.SharedPostgres(&pg))
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

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
// with both tokens, matching fence.ErrStaleToken.
func wantStale(t testing.TB, err error, resource string, token, last uint64) {
	t.Helper()
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("err = %v, want fence.ErrStaleToken", err)
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
