package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/mysql"
)

// TestCallerDeadlineKeepsTheSession: a caller whose deadline passes while
// its statement runs does not cut the statement short. The driver closes a
// connection whose statement's context ends, and every owner's GET_LOCKs
// on that shard go with its session: a caller's short deadline would take
// the other holders' locks with it (their next Extend finds them lost).
// The blocked statement here waits on a row another transaction holds,
// as a statement on a busy server waits.
func TestCallerDeadlineKeepsTheSession(t *testing.T) {
	srv := testserver.StartMySQL(t)
	b := dial(t, srv, mysql.WithConns(1))
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	held, slow := "deadline:held:"+stamp, "deadline:slow:"+stamp
	if _, ok, err := b.Acquire(bg, held, "holder", time.Minute); err != nil || !ok {
		t.Fatalf("Acquire(held) = %v, %v", ok, err)
	}
	// slow's row exists, free, and another session locks it.
	if _, ok, err := b.Acquire(bg, slow, "x", time.Minute); err != nil || !ok {
		t.Fatalf("Acquire(slow) = %v, %v", ok, err)
	}
	if ok, err := b.Release(bg, slow, "x"); err != nil || !ok {
		t.Fatalf("Release(slow) = %v, %v", ok, err)
	}
	conn, err := gomysql.NewConnector(config(srv))
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	tx, err := db.BeginTx(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var name string
	if err := tx.QueryRowContext(bg, "SELECT name FROM turnstile_locks WHERE name = ? FOR UPDATE", mysql.LockName(slow)).Scan(&name); err != nil {
		t.Fatalf("locking slow's row: %v", err)
	}

	done := make(chan error, 1)
	go func() {
		short, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		_, _, err := b.Acquire(short, slow, "late", time.Minute)
		done <- err
	}()
	// Well past the caller's deadline, the row is let go.
	time.Sleep(time.Second)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("the late acquisition: %v", err)
	}

	ok, err := b.Extend(bg, held, "holder", time.Minute)
	if err != nil || !ok {
		t.Fatalf("the holder of another key on the shard lost its lock when a caller's deadline passed mid-statement: Extend = %v, %v", ok, err)
	}
}
