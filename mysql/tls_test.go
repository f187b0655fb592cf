package mysql_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
)

// tlsPassword is the password of the TLS tests' accounts: no error may
// show it.
const tlsPassword = "tls-Secret-4c2e81"

var secrets = tlstest.Secrets{tlsPassword}

// startTLS starts mariadbd with --ssl-cert, --ssl-key and --ssl-ca of a
// fresh certificate set, and these accounts, all with tlsPassword:
//
//   - tls_user: REQUIRE SSL, every privilege on the database;
//   - x509_user: REQUIRE X509 (a client certificate signed by the set's
//     authority), every privilege on the database;
//   - app: REQUIRE SSL, and the least-privilege grants: CREATE, SELECT,
//     INSERT, UPDATE on table turnstile_locks only;
//   - noinsert: REQUIRE SSL, the same grants without INSERT;
//   - nogrant: no privilege at all.
func startTLS(t *testing.T) *testserver.MySQL {
	t.Helper()
	s := testserver.StartMySQLWith(t, mysqlproc.Options{TLS: true})
	db := mysqlproc.Database
	mustExec(t, s, "CREATE USER 'tls_user'@'%' IDENTIFIED BY '"+tlsPassword+"' REQUIRE SSL; GRANT ALL ON "+db+".* TO 'tls_user'@'%';"+
		"CREATE USER 'x509_user'@'%' IDENTIFIED BY '"+tlsPassword+"' REQUIRE X509; GRANT ALL ON "+db+".* TO 'x509_user'@'%';"+
		"CREATE USER 'app'@'%' IDENTIFIED BY '"+tlsPassword+"' REQUIRE SSL; GRANT CREATE, SELECT, INSERT, UPDATE ON "+db+".turnstile_locks TO 'app'@'%';"+
		"CREATE USER 'noinsert'@'%' IDENTIFIED BY '"+tlsPassword+"' REQUIRE SSL; GRANT CREATE, SELECT, UPDATE ON "+db+".turnstile_locks TO 'noinsert'@'%';"+
		"CREATE USER 'nogrant'@'%' IDENTIFIED BY '"+tlsPassword+"';")
	return s
}

func qfile(p string) string { return url.QueryEscape(p) }

// tlsURL is a URL of user (with tlsPassword) on s with the query q.
func tlsURL(s *testserver.MySQL, user, q string) string {
	return "mysql://" + user + ":" + tlsPassword + "@" + s.Addr() + "/" + mysqlproc.Database + "?" + q
}

// TestTLS: against a server with TLS on, the server verified against
// ca_file (under its address or server_name), a client certificate for
// a REQUIRE X509 account, the password from password_file; refused: a
// server signed by another authority, a wrong server_name, a REQUIRE SSL
// account in plain text (with a hint), a REQUIRE X509 account without a
// client certificate.
func TestTLS(t *testing.T) {
	s := startTLS(t)
	c := s.Certs()
	ca := "ca_file=" + qfile(c.CA)
	pw := tlstest.PasswordFile(t, tlsPassword)
	for name, u := range map[string]string{
		"ca_file":            tlsURL(s, "tls_user", ca),
		"tls=true":           tlsURL(s, "tls_user", ca+"&tls=true"),
		"server_name":        tlsURL(s, "tls_user", ca+"&server_name=localhost"),
		"client certificate": tlsURL(s, "x509_user", ca+"&cert_file="+qfile(c.ClientCert)+"&key_file="+qfile(c.ClientKey)),
		"password_file":      "mysql://tls_user@" + s.Addr() + "/" + mysqlproc.Database + "?" + ca + "&password_file=" + qfile(pw),
	} {
		t.Run("ok/"+name, func(t *testing.T) { tlstest.LockOnce(t, u, "tls-"+name) })
	}
	for _, tc := range []struct{ name, url, want string }{
		{"other CA", tlsURL(s, "tls_user", "ca_file="+qfile(c.OtherCA)), "certificate signed by unknown authority"},
		{"system roots", tlsURL(s, "tls_user", "tls=true"), "certificate signed by unknown authority"},
		{"wrong server_name", tlsURL(s, "tls_user", ca+"&server_name=db.example.com"), "not db.example.com"},
		{"plain text, REQUIRE SSL", tlsURL(s, "tls_user", ""), "if the account requires TLS, give ca_file or tls=true"},
		{"no client certificate, REQUIRE X509", tlsURL(s, "x509_user", ca), "if the account requires a client certificate, give cert_file and key_file"},
		{"wrong password", "mysql://tls_user:not-" + tlsPassword + "@" + s.Addr() + "/" + mysqlproc.Database + "?" + ca, "Access denied"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) { secrets.Refused(t, tc.url, tc.want) })
	}
}

// TestTLSToPlainServer: TLS asked of a server without it is an error that
// says so, never a plain-text session.
func TestTLSToPlainServer(t *testing.T) {
	s := testserver.StartMySQL(t)
	c := testcerts.New(t)
	u := "mysql://" + mysqlproc.User + ":" + mysqlproc.Password + "@" + s.Addr() + "/" + mysqlproc.Database + "?ca_file=" + qfile(c.CA)
	err := secrets.OpenFails(t, 20*time.Second, u)
	if !strings.Contains(err.Error(), "server does not support TLS") {
		t.Fatalf("Open: %v; want \"server does not support TLS\"", err)
	}
}

// TestLeastPrivilege: an account with only CREATE, SELECT, INSERT and
// UPDATE on turnstile_locks does everything turnstile does, operator
// calls included; without INSERT, without CREATE, or with no privilege,
// the server's
// refusal is turnstile.ErrPermission and names what was refused.
func TestLeastPrivilege(t *testing.T) {
	s := startTLS(t)
	ca := "ca_file=" + qfile(s.Certs().CA)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tlstest.EveryCall(t, tlsURL(s, "app", ca), "lp")
	tlstest.LockOnce(t, tlsURL(s, "app", ca), "lp")

	c, err := turnstile.Open(ctx, tlsURL(s, "noinsert", ca))
	if err != nil {
		t.Fatalf("Open as noinsert: %v", err)
	}
	defer c.Close()
	_, err = c.TryAcquire(ctx, "lp-new")
	t.Log(err)
	if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "INSERT command denied") || !strings.Contains(err.Error(), "turnstile_locks") {
		t.Fatalf("TryAcquire without INSERT: %v; want ErrPermission naming INSERT on turnstile_locks", err)
	}

	mustExec(t, s, "CREATE USER 'nocreate'@'%' IDENTIFIED BY '"+tlsPassword+"' REQUIRE SSL; GRANT SELECT, INSERT, UPDATE ON "+mysqlproc.Database+".turnstile_locks TO 'nocreate'@'%';")
	// Dial creates the table if it is missing: CREATE is needed even once
	// the table exists.
	err = secrets.OpenFails(t, 20*time.Second, tlsURL(s, "nocreate", ca))
	if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "CREATE command denied") {
		t.Fatalf("Open without CREATE: %v; want ErrPermission naming CREATE", err)
	}
	err = secrets.OpenFails(t, 20*time.Second, tlsURL(s, "nogrant", ""))
	if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "Access denied") || !strings.Contains(err.Error(), mysqlproc.Database) {
		t.Fatalf("Open with no privilege: %v; want ErrPermission naming the database", err)
	}
}

// TestTLSParamsInvalid: a bad TLS or password parameter is an invalid
// URL at once, before any connection (the host does not exist), and the
// error shows no password.
func TestTLSParamsInvalid(t *testing.T) {
	c := testcerts.New(t)
	base := "mysql://u:" + tlsPassword + "@db.invalid:3306/db?"
	secrets.InvalidFileParams(t, base, c)
	for _, tc := range []struct{ q, want string }{
		{"ca_file=" + qfile(c.CA) + "&tls=false", "tls=false contradicts"},
		{"ca_file=" + qfile(c.CA) + "&tls=skip-verify", "use tls=true or leave tls out"},
		{"server_name=localhost&tls=preferred", "use tls=true or leave tls out"},
		{"ca_file=" + qfile(c.CA) + "&tls=bogus", "tls"},
		{"ca_file=" + qfile(c.CA) + "&ca_file=" + qfile(c.CA), "given 2 times"},
		{"password_file=" + qfile(c.NotPEM), "a password both in the URL and in password_file"},
	} {
		t.Run(tc.q, func(t *testing.T) { secrets.InvalidURL(t, base+tc.q, tc.want) })
	}
}
