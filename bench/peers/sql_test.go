package peers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestPostgresAdvisory: pg_advisory_lock on a pool of a connection per
// worker excludes its workers from one key, refuses two servers and
// closes its pool; a cancelled wait returns.
func TestPostgresAdvisory(t *testing.T) {
	srv := testserver.StartPostgres(t)
	lib := peers.PostgresAdvisory("postgres", "postgres")
	checkRecipe(t, lib, srv.Addr())
	checkCancelledWait(t, lib, srv.Addr())
}

// TestMySQLGetLock: GET_LOCK on a pool of a connection per worker
// excludes its workers from one key, refuses two servers, a name
// longer than GET_LOCK takes, and closes its pool; a cancelled wait
// returns.
func TestMySQLGetLock(t *testing.T) {
	srv := testserver.StartMySQL(t)
	lib := peers.MySQLGetLock(mysqlproc.User, mysqlproc.Password, mysqlproc.Database)
	checkRecipe(t, lib, srv.Addr())
	checkCancelledWait(t, lib, srv.Addr())
	lk, err := lib.Open(context.Background(), []string{srv.Addr()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if _, err := lk.Acquire(context.Background(), strings.Repeat("k", 65)); !errors.Is(err, workload.ErrUsage) {
		t.Errorf("a 65-byte name: %v, want ErrUsage", err)
	}
}

// checkCancelledWait: a worker waiting for a key another holds returns
// when its context ends, and the holder still releases its lock.
func checkCancelledWait(t *testing.T, lib workload.Library, addr string) {
	t.Helper()
	lk, err := lib.Open(context.Background(), []string{addr}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	h, err := lk.Acquire(context.Background(), "held")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lk.Acquire(ctx, "held"); err == nil {
		t.Fatal("acquired a key another worker holds")
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatalf("release after a cancelled wait: %v", err)
	}
}
