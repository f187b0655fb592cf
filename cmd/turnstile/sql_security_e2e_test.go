//go:build unix

package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// sqlSecret is the password of the accounts these tests create: no
// output of turnstile may show it.
const sqlSecret = "sql-Secret-5be0d3"

// checkRefused runs turnstile run against backend and checks the exit
// code, that stderr says want (and the permission hint if hint), and that
// it shows no password.
func checkRefused(t *testing.T, backend string, code int, want string, hint bool) {
	t.Helper()
	r := runTurnstile(t, nil, "run", "--backend", backend, "--key", "lock:sec", "--no-wait", "--", "true")
	t.Logf("exit %d:\n%s", r.code, r.stderr)
	if r.code != code || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit code %d, want %d with %q; stderr:\n%s", r.code, code, want, r.stderr)
	}
	if got := strings.Contains(r.stderr, "hint: the store's user lacks a permission"); got != hint {
		t.Fatalf("permission hint shown: %v, want %v; stderr:\n%s", got, hint, r.stderr)
	}
	if strings.Contains(r.stderr, sqlSecret) {
		t.Fatalf("stderr shows the password:\n%s", r.stderr)
	}
}

// TestRunPostgresTLS: the CLI against PostgreSQL that takes TLS connections
// only (ssl=on, hostssl lines only): locks over verify-full TLS, with a
// password or a client certificate; a bad TLS parameter is a usage error
// (64) at once; a wrong authority, and a role without a schema to
// create in or without a privilege on the table, are store errors (69),
// the latter two with the permission hint.
func TestRunPostgresTLS(t *testing.T) {
	srv := testserver.StartPostgresWith(t, pgproc.Options{TLS: true, HostSSLOnly: true})
	c := srv.Certs()
	ca := url.QueryEscape(c.CA)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, "postgres://postgres@"+srv.Addr()+"/postgres?sslmode=verify-full&sslrootcert="+ca)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{
		"CREATE ROLE app LOGIN PASSWORD '" + sqlSecret + "'", "CREATE SCHEMA app AUTHORIZATION app",
		"CREATE ROLE client LOGIN", "CREATE SCHEMA client AUTHORIZATION client",
		"CREATE ROLE stranger LOGIN PASSWORD '" + sqlSecret + "'",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(sqlSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := "postgres://app@" + srv.Addr() + "/postgres?ca_file=" + ca + "&password_file=" + url.QueryEscape(pw)

	t.Run("password over TLS", func(t *testing.T) { checkRunsUnderLock(t, app) })
	t.Run("client certificate", func(t *testing.T) {
		checkRunsUnderLock(t, "postgres://client@"+srv.Addr()+"/postgres?ca_file="+ca+"&cert_file="+url.QueryEscape(c.ClientCert)+"&key_file="+url.QueryEscape(c.ClientKey))
	})
	t.Run("bad parameter", func(t *testing.T) {
		checkRefused(t, "postgres://app:"+sqlSecret+"@"+srv.Addr()+"/postgres?ca_file="+ca+"&sslmode=prefer", exitUsage, "sslmode=prefer contradicts", false)
		checkRefused(t, "postgres://app:"+sqlSecret+"@"+srv.Addr()+"/postgres?ca_file=/nonexistent.pem", exitUsage, "ca_file", false)
	})
	t.Run("other CA", func(t *testing.T) {
		checkRefused(t, "postgres://app:"+sqlSecret+"@"+srv.Addr()+"/postgres?ca_file="+url.QueryEscape(c.OtherCA), exitUnavailable, "certificate signed by unknown authority", false)
	})
	t.Run("no schema", func(t *testing.T) {
		checkRefused(t, "postgres://stranger:"+sqlSecret+"@"+srv.Addr()+"/postgres?ca_file="+ca, exitUnavailable, "permission denied for schema public", true)
	})
	t.Run("missing privilege", func(t *testing.T) {
		if _, err := admin.Exec(ctx, "REVOKE UPDATE ON app.turnstile_locks FROM app"); err != nil {
			t.Fatal(err)
		}
		checkRefused(t, "postgres://app:"+sqlSecret+"@"+srv.Addr()+"/postgres?ca_file="+ca, exitUnavailable, "permission denied for table turnstile_locks", true)
	})
}

// TestRunMySQLTLS: the CLI against MariaDB with TLS on (--ssl-cert,
// --ssl-key, --ssl-ca): locks over verified TLS for a REQUIRE SSL
// account with the least-privilege grants; plain text for that account
// fails with the REQUIRE SSL hint; a bad TLS parameter is a usage error
// (64); a missing privilege a store error (69) with the permission hint.
func TestRunMySQLTLS(t *testing.T) {
	srv := testserver.StartMySQLWith(t, mysqlproc.Options{TLS: true})
	db := mysqlproc.Database
	if _, err := srv.Exec("CREATE USER 'app'@'%' IDENTIFIED BY '" + sqlSecret + "' REQUIRE SSL; GRANT CREATE, SELECT, INSERT, UPDATE ON " + db + ".turnstile_locks TO 'app'@'%';" +
		"CREATE USER 'noinsert'@'%' IDENTIFIED BY '" + sqlSecret + "' REQUIRE SSL; GRANT CREATE, SELECT, UPDATE ON " + db + ".turnstile_locks TO 'noinsert'@'%';"); err != nil {
		t.Fatal(err)
	}
	ca := url.QueryEscape(srv.Certs().CA)
	base := func(user string) string { return "mysql://" + user + ":" + sqlSecret + "@" + srv.Addr() + "/" + db }

	t.Run("least privilege over TLS", func(t *testing.T) { checkRunsUnderLock(t, base("app")+"?ca_file="+ca) })
	t.Run("plain text", func(t *testing.T) {
		checkRefused(t, base("app"), exitUnavailable, "if the account requires TLS", false)
	})
	t.Run("bad parameter", func(t *testing.T) {
		checkRefused(t, base("app")+"?ca_file="+ca+"&tls=skip-verify", exitUsage, "use tls=true or leave tls out", false)
	})
	t.Run("other CA", func(t *testing.T) {
		checkRefused(t, base("app")+"?ca_file="+url.QueryEscape(srv.Certs().OtherCA), exitUnavailable, "certificate signed by unknown authority", false)
	})
	t.Run("missing privilege", func(t *testing.T) {
		checkRefused(t, base("noinsert")+"?ca_file="+ca, exitUnavailable, "INSERT command denied", true)
	})
}
