package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
)

// appPassword is the password of role app on the TLS server: no error may
// show it.
const appPassword = "app-Secret-7f3a91"

var secrets = tlstest.Secrets{appPassword}

// startTLS starts a server that takes TCP connections over TLS only
// (ssl=on with ssl_cert_file, ssl_key_file and ssl_ca_file of a fresh
// certificate set; hostssl lines only in pg_hba.conf), with the roles of
// the least-privilege recipe:
//
//   - app: a password (scram-sha-256) and a schema of its own, app, where
//     turnstile creates its table and functions; no other privilege;
//   - client: authenticated by its client certificate (cert), with a
//     schema of its own too;
//   - stranger: a password and nothing else.
func startTLS(t *testing.T) *testserver.Postgres {
	t.Helper()
	s := testserver.StartPostgresWith(t, pgproc.Options{TLS: true, HostSSLOnly: true})
	admin(t, s,
		"CREATE ROLE app LOGIN PASSWORD '"+appPassword+"'",
		"CREATE SCHEMA app AUTHORIZATION app",
		"CREATE ROLE client LOGIN",
		"CREATE SCHEMA client AUTHORIZATION client",
		"CREATE ROLE stranger LOGIN PASSWORD 'stranger-pw'",
	)
	return s
}

// admin runs statements as the superuser, over TLS with libpq's own
// parameters (pgx's, here).
func admin(t *testing.T, s *testserver.Postgres, stmts ...string) {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	c, err := pgx.Connect(ctx, "postgres://postgres@"+s.Addr()+"/postgres?sslmode=verify-full&sslrootcert="+url.QueryEscape(s.Certs().CA))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// tlsURL is a URL of user on s with the query q.
func tlsURL(s *testserver.Postgres, user, q string) string {
	return "postgres://" + user + "@" + s.Addr() + "/postgres?" + q
}

// qfile is a file path as a query value.
func qfile(p string) string { return url.QueryEscape(p) }

// TestTLSVerifyFull: over TLS with the server's certificate verified —
// by ca_file (sslmode verify-full by default), under server_name, by
// libpq's own sslmode=verify-full&sslrootcert, with a client certificate
// as the only credential, and with a SCRAM password from password_file —
// locks are taken with fencing tokens.
func TestTLSVerifyFull(t *testing.T) {
	s := startTLS(t)
	c := s.Certs()
	pwFile := tlstest.PasswordFile(t, appPassword)
	for name, u := range map[string]string{
		"ca_file":              tlsURL(s, "postgres", "ca_file="+qfile(c.CA)),
		"server_name":          tlsURL(s, "postgres", "ca_file="+qfile(c.CA)+"&server_name=localhost"),
		"explicit verify-full": tlsURL(s, "postgres", "ca_file="+qfile(c.CA)+"&sslmode=verify-full"),
		"libpq":                tlsURL(s, "postgres", "sslmode=verify-full&sslrootcert="+qfile(c.CA)),
		"client certificate":   tlsURL(s, "client", "ca_file="+qfile(c.CA)+"&cert_file="+qfile(c.ClientCert)+"&key_file="+qfile(c.ClientKey)),
		"password_file":        tlsURL(s, "app", "ca_file="+qfile(c.CA)+"&password_file="+qfile(pwFile)),
	} {
		t.Run(name, func(t *testing.T) { tlstest.LockOnce(t, u, "tls-"+name) })
	}
}

// TestTLSRefused: a server whose certificate the client cannot verify is
// refused with an error that names the problem, and so is a wrong
// server_name; a client certificate is the only way in for user client.
func TestTLSRefused(t *testing.T) {
	s := startTLS(t)
	c := s.Certs()
	for _, tc := range []struct{ name, url, want string }{
		{"other CA", tlsURL(s, "postgres", "ca_file="+qfile(c.OtherCA)), "certificate signed by unknown authority"},
		{"system roots", tlsURL(s, "postgres", "sslmode=verify-full"), "certificate signed by unknown authority"},
		{"wrong server_name", tlsURL(s, "postgres", "ca_file="+qfile(c.CA)+"&server_name=db.example.com"), "not db.example.com"},
		{"no client certificate", tlsURL(s, "client", "ca_file="+qfile(c.CA)), "connection requires a valid client certificate"},
		{"plain text to a TLS-only server", tlsURL(s, "postgres", "sslmode=disable"), "no encryption"},
		{"wrong password", "postgres://app:not-" + appPassword + "@" + s.Addr() + "/postgres?ca_file=" + qfile(c.CA), "password authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) { secrets.Refused(t, tc.url, tc.want) })
	}
}

// TestTLSToPlainServer: TLS asked of a server that has none is an error
// that says so, never a plain-text session.
func TestTLSToPlainServer(t *testing.T) {
	c := testcerts.New(t)
	for _, q := range []string{"ca_file=" + qfile(c.CA), "sslmode=verify-full&sslrootcert=" + qfile(c.CA)} {
		_, err := turnstile.Open(ctxFor(t, 20*time.Second), "postgres://postgres@"+srv.Addr()+"/postgres?"+q)
		if err == nil || !strings.Contains(err.Error(), "server refused TLS") {
			t.Fatalf("Open(%s) against a server without TLS: %v; want \"server refused TLS\"", q, err)
		}
	}
}

// TestTLSParamsInvalid: a bad TLS or password parameter is an invalid
// URL at once, before any connection (the host does not exist), and the
// error shows no password.
func TestTLSParamsInvalid(t *testing.T) {
	c := testcerts.New(t)
	const secret = "hunter2-Secret-Pw"
	secrets := tlstest.Secrets{secret}
	base := "postgres://u:" + secret + "@db.invalid:5432/db?"
	secrets.InvalidFileParams(t, base, c)
	for _, tc := range []struct{ q, want string }{
		{"ca_file=" + qfile(c.CA) + "&sslmode=disable", "sslmode=disable contradicts"},
		{"ca_file=" + qfile(c.CA) + "&sslmode=prefer", "sslmode=prefer contradicts"},
		{"ca_file=" + qfile(c.CA) + "&sslmode=allow", "sslmode=allow contradicts"},
		{"ca_file=" + qfile(c.CA) + "&sslmode=require", "sslmode=verify-full"},
		{"ca_file=" + qfile(c.CA) + "&sslmode=verify-full&sslmode=disable", "given 2 times"},
		{"ca_file=" + qfile(c.CA) + "&sslrootcert=" + qfile(c.CA), "not both"},
		{"server_name=localhost&sslcert=" + qfile(c.ClientCert), "not both"},
		{"ca_file=" + qfile(c.CA) + "&ca_file=" + qfile(c.CA), "given 2 times"},
	} {
		t.Run(tc.q, func(t *testing.T) { secrets.InvalidURL(t, base+tc.q, tc.want) })
	}
	// A password both in the URL and in password_file, or a file that is
	// not there.
	pw := tlstest.PasswordFile(t, secret+"-from-file")
	for _, u := range []string{base + "password_file=" + qfile(pw), "postgres://u@db.invalid/db?password_file=" + qfile(c.Missing)} {
		secrets.InvalidURL(t, u, "password_file")
	}
}

// TestLeastPrivilege: the recipe's role — its own schema, nothing else —
// runs turnstile (the TLS tests above lock with it); a role without
// CREATE on a schema to put turnstile's objects in, and a role that lost
// UPDATE on turnstile_locks, get turnstile.ErrPermission naming what was
// refused.
func TestLeastPrivilege(t *testing.T) {
	s := startTLS(t)
	ca := qfile(s.Certs().CA)
	ctx := ctxFor(t, 30*time.Second)

	// The recipe: everything turnstile does, operator calls included.
	app := "postgres://app:" + appPassword + "@" + s.Addr() + "/postgres?ca_file=" + ca
	tlstest.EveryCall(t, app, "lp")

	// No schema to create turnstile's objects in.
	_, err := turnstile.Open(ctx, "postgres://stranger:stranger-pw@"+s.Addr()+"/postgres?ca_file="+ca)
	if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "permission denied for schema public") {
		t.Fatalf("Open as a role without a schema: %v; want ErrPermission naming schema public", err)
	}

	// The table without UPDATE.
	admin(t, s, "REVOKE UPDATE ON app.turnstile_locks FROM app")
	c, err := turnstile.Open(ctx, app)
	if err != nil {
		t.Fatalf("Open as app: %v", err)
	}
	defer c.Close()
	_, err = c.TryAcquire(ctx, "lp")
	t.Log(err)
	if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "permission denied for table turnstile_locks") {
		t.Fatalf("TryAcquire without UPDATE: %v; want ErrPermission naming table turnstile_locks", err)
	}
	secrets.CheckHidden(t, err)
}
