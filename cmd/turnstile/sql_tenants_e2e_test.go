//go:build unix

package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	be "encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// tenantHMAC is the HMAC-SHA256 that names a key's lock in a tenant of a
// SQL store: keyed with the tenant's salt, over the tenant's name, NUL
// and the key.
func tenantHMAC(salt uint64, tenant, key string) []byte {
	var k [8]byte
	be.BigEndian.PutUint64(k[:], salt)
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte(tenant + "\x00" + key))
	return m.Sum(nil)
}

// checkTenantsApart holds key in tenant a and runs under key in tenant b:
// b's run must not wait for a's lock.
func checkTenantsApart(t *testing.T, a, b, key string) {
	t.Helper()
	dir := t.TempDir()
	holder := startTurnstile(t, []string{"TURNSTILE_BACKEND=" + a, "DIR=" + dir}, "run", "--key", key, "--ttl", "10s", "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)
	r := runTurnstile(t, []string{"TURNSTILE_BACKEND=" + b}, "run", "--key", key, "--no-wait", "--", "true")
	if r.code != exitOK {
		t.Errorf("a run in another tenant while the first holds %s: exit code %d, want 0; stderr:\n%s", key, r.code, r.stderr)
	}
	if r := runTurnstile(t, []string{"TURNSTILE_BACKEND=" + a}, "run", "--key", key, "--no-wait", "--", "true"); r.code != exitNotAcquired {
		t.Errorf("a second run in the holder's tenant: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(t, time.Minute); r.code != 0 {
		t.Fatalf("holder: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
}

// checkOutsiderShown: while a session outside turnstile holds key's lock,
// a run cannot take key and status says it is held, by a holder whose
// owner says want.
func checkOutsiderShown(t *testing.T, backend, key, want string) {
	t.Helper()
	env := []string{"TURNSTILE_BACKEND=" + backend}
	if r := runTurnstile(t, env, "run", "--key", key, "--no-wait", "--", "true"); r.code != exitNotAcquired {
		t.Errorf("a run while an outsider holds the lock: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	r := runTurnstile(t, env, "status", key)
	t.Logf("status:\n%s", r.stdout)
	if r.code != exitOK || !strings.Contains(r.stdout, key+" is held") || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "ttl left    session") {
		t.Fatalf("status while an outsider holds the lock: exit code %d, stdout:\n%s\nstderr:\n%s\nwant held by a session naming %q", r.code, r.stdout, r.stderr, want)
	}
}

// TestPostgresTenants: tenants in two schemas of one database lock one key
// each for itself, and a role with nothing but CONNECT that holds a key's
// advisory lock shows in status as its holder.
func TestPostgresTenants(t *testing.T) {
	srv := testserver.StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{"CREATE SCHEMA tsa", "CREATE SCHEMA tsb", "CREATE ROLE outsider LOGIN"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tsa, tsb := srv.URL()+"&search_path=tsa", srv.URL()+"&search_path=tsb"
	checkTenantsApart(t, tsa, tsb, "nightly-report")

	var salt int64
	if err := admin.QueryRow(ctx, "SELECT token FROM tsb.turnstile_locks WHERE key = ''").Scan(&salt); err != nil {
		t.Fatal(err)
	}
	id := int64(be.BigEndian.Uint64(tenantHMAC(uint64(salt), "tsb", "nightly-report")[:8]))
	cfg, err := pgx.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = "outsider"
	outsider, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close(context.Background())
	var pid int
	if err := outsider.QueryRow(ctx, "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock($1)) l", id).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	checkOutsiderShown(t, tsb, "nightly-report", fmt.Sprintf("pid %d, user outsider", pid))
}

// TestMySQLTenants: tenants in two databases of one server lock one key
// each for itself, and an account without privileges that holds a key's
// user lock shows in status as its holder.
func TestMySQLTenants(t *testing.T) {
	srv := testserver.StartMySQL(t)
	if _, err := srv.Exec("CREATE DATABASE tsb; GRANT ALL ON tsb.* TO '" + mysqlproc.User + "'@'%'; CREATE USER 'outsider'@'%' IDENTIFIED BY 'outsider-pw';"); err != nil {
		t.Fatal(err)
	}
	tsa := srv.URL()
	tsb := strings.TrimSuffix(tsa, "/"+mysqlproc.Database) + "/tsb"
	checkTenantsApart(t, tsa, tsb, "nightly-report")

	out, err := srv.Exec("SELECT token FROM tsb.turnstile_locks WHERE name = ''")
	if err != nil {
		t.Fatal(err)
	}
	var salt uint64
	if _, err := fmt.Sscan(out, &salt); err != nil {
		t.Fatalf("salt %q: %v", out, err)
	}
	name := ("turnstile:" + hex.EncodeToString(tenantHMAC(salt, "tsb", "nightly-report")))[:64]
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd = "tcp", srv.Addr(), "outsider", "outsider-pw"
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var id int64
	var got int
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID(), GET_LOCK(?, 0)", name).Scan(&id, &got); err != nil || got != 1 {
		t.Fatalf("outsider's GET_LOCK = %d, %v", got, err)
	}
	checkOutsiderShown(t, tsb, "nightly-report", fmt.Sprintf("connection %d", id))
}
