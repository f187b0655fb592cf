package mysql_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/mysql"
)

// TestTenants: tenants of one server — databases of their own, as
// docs/security/mysql.md recommends — do not share locks, and an account
// outside every tenant that holds a key's user lock shows as its holder.
func TestTenants(t *testing.T) {
	srv := testserver.StartMySQL(t)
	mustExec(t, srv, "CREATE DATABASE tsb; GRANT ALL ON tsb.* TO '"+mysqlproc.User+"'@'%';"+
		"CREATE USER 'outsider'@'%' IDENTIFIED BY 'outsider-pw';")
	t.Run("Apart", func(t *testing.T) { testTenantsApart(t, srv) })
	t.Run("OutsiderHoldShown", func(t *testing.T) { testOutsiderHoldShown(t, srv) })
	t.Run("LongKeyNameIsNoShortKey", func(t *testing.T) { testLongKeyNameIsNoShortKey(t, srv) })
}

// testTenantsApart: a key that tenant turnstile holds is free for tenant
// tsb, and still held for another client of tenant turnstile.
func testTenantsApart(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	a, a2 := dial(t, srv), dial(t, srv)
	cfg := config(srv)
	cfg.DBName = "tsb"
	b, err := mysql.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok, err := a.Acquire(ctx, "nightly-report", "a", time.Minute); !ok || err != nil {
		t.Fatalf("tenant %s: acquire = %v, %v", mysqlproc.Database, ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "nightly-report", "b", time.Minute); !ok || err != nil {
		t.Fatalf("tenant tsb: acquire of a key that only tenant %s holds = %v, %v; want it granted", mysqlproc.Database, ok, err)
	}
	if _, ok, err := a2.Acquire(ctx, "nightly-report", "a2", time.Minute); ok || err != nil {
		t.Fatalf("a second client of tenant %s: acquire = %v, %v; want refused", mysqlproc.Database, ok, err)
	}
	for _, be := range []*mysql.Backend{a, b} {
		st, err := be.Inspect(ctx, "nightly-report")
		if err != nil || !st.Held || len(st.Holders) != 1 {
			t.Fatalf("inspect: %+v, %v", st, err)
		}
	}
	if ok, err := a.Release(ctx, "nightly-report", "a"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := b.Release(ctx, "nightly-report", "b"); !ok || err != nil {
		t.Fatal(ok, err)
	}
}

// testOutsiderHoldShown: an account with no privilege (USAGE) can take a
// user lock by name; while it holds a key's, turnstile's clients are kept
// out and Inspect says the key is held, naming the session, not free.
func testOutsiderHoldShown(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	be := dial(t, srv)
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd = "tcp", srv.Addr(), "outsider", "outsider-pw"
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "SELECT token FROM "+mysqlproc.Database+".turnstile_locks LIMIT 1"); err == nil {
		t.Fatal("the outsider reads turnstile_locks")
	}
	const key = "outsider-held"
	var id int64
	var got int
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID(), GET_LOCK(?, 0)", mysql.UserLockName(be, key)).Scan(&id, &got); err != nil || got != 1 {
		t.Fatalf("outsider's GET_LOCK = %d, %v", got, err)
	}
	if _, ok, err := be.Acquire(ctx, key, "o", time.Minute); ok || err != nil {
		t.Fatalf("acquire while the outsider holds the user lock = %v, %v; want refused", ok, err)
	}
	st, err := be.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || len(st.Holders) != 1 {
		t.Fatalf("Inspect while the outsider holds the user lock = %+v; want held", st)
	}
	h := st.Holders[0]
	if want := fmt.Sprintf("connection %d", id); !strings.Contains(h.Owner, want) || h.TTL != -1 {
		t.Fatalf("holder %+v; want an owner naming %q, TTL -1 (the session's)", h, want)
	}
	t.Logf("holder: %s", h.Owner)
	if _, err := c.ExecContext(ctx, "DO RELEASE_ALL_LOCKS()"); err != nil {
		t.Fatal(err)
	}
	if st, err := be.Inspect(ctx, key); err != nil || st.Held {
		t.Fatalf("Inspect after the outsider let go = %+v, %v; want free", st, err)
	}
	if _, ok, err := be.Acquire(ctx, key, "o", time.Minute); !ok || err != nil {
		t.Fatalf("acquire after the outsider let go = %v, %v", ok, err)
	}
}

// testLongKeyNameIsNoShortKey: a key over 64 bytes and the 64-byte key
// that spells the name it was once stored under ("ts:" and 61 hex digits
// of its SHA-256) are two locks: neither keeps the other out, and
// forcing one free leaves the other held.
func testLongKeyNameIsNoShortKey(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	long := "report/" + strings.Repeat("x", 90)
	sum := sha256.Sum256([]byte(long))
	short := ("ts:" + hex.EncodeToString(sum[:]))[:64]
	a, b := dial(t, srv), dial(t, srv)
	if _, ok, err := a.Acquire(ctx, long, "a", time.Minute); !ok || err != nil {
		t.Fatalf("acquire the long key = %v, %v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, short, "b", time.Minute); !ok || err != nil {
		t.Fatalf("acquire %q while only the long key is held = %v, %v; want granted", short, ok, err)
	}
	if _, ok, err := a.Acquire(ctx, short, "a2", time.Minute); ok || err != nil {
		t.Fatalf("acquire the held short key = %v, %v; want refused", ok, err)
	}
	if _, err := a.ForceRelease(ctx, short); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Inspect(ctx, long); err != nil || !st.Held || st.Holders[0].Owner != "a" {
		t.Fatalf("the long key after the short one was forced free: %+v, %v; want still a's", st, err)
	}
	if ok, err := a.Release(ctx, long, "a"); !ok || err != nil {
		t.Fatalf("release the long key = %v, %v", ok, err)
	}
}

// TestDialUnreachable: a server that is not there is named by address
// as one that could not be connected to, with the cause kept.
func TestDialUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName = "tcp", addr, "u", "hunter2-secret", "db"
	cfg.Timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = mysql.Dial(ctx, cfg)
	var op *net.OpError
	if err == nil || !strings.Contains(err.Error(), "could not connect to the server at "+addr) || !errors.As(err, &op) ||
		strings.Contains(err.Error(), "create table") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Dial of a closed port = %v; want it to say it could not connect to the server at %s, keeping the dial error", err, addr)
	}
	t.Log(err)
	_, err = turnstile.Open(ctx, "mysql://u:hunter2-secret@"+addr+"/db?dial_timeout=2s")
	if err == nil || !strings.Contains(err.Error(), "could not connect to the server at "+addr) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open of a closed port = %v; want it to say it could not connect to the server at %s", err, addr)
	}
}
