//go:build unix

package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestRunEtcdTLS runs the binary against an etcd that serves clients
// over TLS only, wants client certificates and has its authentication
// on, with a user whose role may read and write /turnstile/ alone.
func TestRunEtcdTLS(t *testing.T) {
	const pw = "QJZVWKcliQJZVWK"
	certs := testcerts.New(t)
	srv := testserver.StartEtcdTLS(t, certs)
	if err := srv.EnableAuth("QJZVWKrootQJZVWK", etcdproc.User{Name: "turnstile", Password: pw, Prefix: "/turnstile/"}); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "etcd://turnstile@" + srv.Addr() + "?password_file=" + url.QueryEscape(pwFile) + "&dial_timeout=3s&"
	good := base + etcdproc.TLSQuery(certs)

	t.Run("runs under the lock", func(t *testing.T) { checkRunsUnderLock(t, good) })

	t.Run("password in the URL", func(t *testing.T) {
		u := "etcd://turnstile:" + pw + "@" + srv.Addr() + "?" + etcdproc.TLSQuery(certs)
		if r := runTurnstile(t, nil, "run", "--backend", u, "--key", "k", "--no-wait", "--", "true"); r.code != 0 {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
	})

	t.Run("other CA", func(t *testing.T) {
		u := base + url.Values{"ca_file": {certs.OtherCA}, "cert_file": {certs.ClientCert}, "key_file": {certs.ClientKey}}.Encode()
		r := runTurnstile(t, nil, "run", "--backend", u, "--key", "k", "--no-wait", "--", "true")
		t.Logf("stderr: %s", r.stderr)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "x509: certificate signed by unknown authority") {
			t.Fatalf("a CA that did not sign etcd's certificate: exit code %d, want %d naming the certificate problem; stderr:\n%s", r.code, exitUnavailable, r.stderr)
		}
	})

	t.Run("no permission", func(t *testing.T) {
		u := good + "&prefix=/elsewhere/"
		r := runTurnstile(t, nil, "run", "--backend", u, "--key", "k", "--no-wait", "--", "true")
		t.Logf("stderr: %s", r.stderr)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "/elsewhere/locks/k") || !strings.Contains(r.stderr, "hint:") {
			t.Fatalf("a lock outside the user's role: exit code %d, want %d naming the key, with the hint; stderr:\n%s", r.code, exitUnavailable, r.stderr)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, u := range []string{
			base + "ca_file=" + url.QueryEscape(filepath.Join(t.TempDir(), "missing.pem")),
			base + "cert_file=" + url.QueryEscape(certs.ClientCert),
			base + "tls=off&ca_file=" + url.QueryEscape(certs.CA),
			base + "server_name=a%20b",
			"etcd://turnstile:" + pw + "@" + srv.Addr() + "?ca_file=" + url.QueryEscape(certs.ServerKey),
		} {
			r := runTurnstile(t, nil, "run", "--backend", u, "--key", "k", "--no-wait", "--", "true")
			if r.code != exitUsage {
				t.Errorf("--backend %s: exit code %d, want %d; stderr:\n%s", u, r.code, exitUsage, r.stderr)
			}
			if strings.Contains(r.stderr, pw) || strings.Contains(r.stderr, "QJZVWK") {
				t.Errorf("--backend %s: stderr shows the password:\n%s", u, r.stderr)
			}
		}
	})
}

// TestRunZooKeeperDigest runs the binary with ZooKeeper credentials: it
// holds the lock, and a client without them (or with others) can neither
// take it nor remove it by force meanwhile; and over TLS, on the
// server's TLS-only port.
func TestRunZooKeeperDigest(t *testing.T) {
	certs := testcerts.New(t)
	srv := testserver.StartZooKeeperTLS(t, certs)
	u := "zookeeper://cli:QJZVWKzkQJZVWK@" + srv.Addr() + "/secure"
	t.Run("runs under the lock", func(t *testing.T) { checkRunsUnderLock(t, u) })

	t.Run("TLS", func(t *testing.T) {
		q := url.Values{"ca_file": {certs.CA}, "cert_file": {certs.ClientCert}, "key_file": {certs.ClientKey}}
		tlsURL := "zookeeper://cli:QJZVWKzkQJZVWK@" + srv.TLSAddr() + "/secure?"
		if r := runTurnstile(t, nil, "run", "--backend", tlsURL+q.Encode(), "--key", "tls", "--no-wait", "--", "true"); r.code != 0 {
			t.Fatalf("run over TLS: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		q.Set("ca_file", certs.OtherCA)
		r := runTurnstile(t, nil, "run", "--backend", tlsURL+q.Encode(), "--key", "tls", "--no-wait", "--", "true")
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "x509: certificate signed by unknown authority") {
			t.Fatalf("a CA that did not sign ZooKeeper's certificate: exit code %d, want %d naming the certificate problem; stderr:\n%s", r.code, exitUnavailable, r.stderr)
		}
		q.Set("ca_file", filepath.Join(t.TempDir(), "missing.pem"))
		if r := runTurnstile(t, nil, "run", "--backend", tlsURL+q.Encode(), "--key", "tls", "--no-wait", "--", "true"); r.code != exitUsage || strings.Contains(r.stderr, "QJZVWK") {
			t.Fatalf("a missing ca_file: exit code %d, want %d without the password; stderr:\n%s", r.code, exitUsage, r.stderr)
		}
	})

	t.Run("holder's lock refused to others", func(t *testing.T) {
		dir := t.TempDir()
		env := []string{"TURNSTILE_BACKEND=" + u, "DIR=" + dir}
		holder := startTurnstile(t, env, "run", "--key", "guarded", "--ttl", "5s", "--", "sh", "-c", holdScript)
		waitForFile(t, filepath.Join(dir, "held"), time.Minute)
		for _, other := range []string{"zookeeper://" + srv.Addr() + "/secure", "zookeeper://mallory:QJZVWKxQJZVWK@" + srv.Addr() + "/secure"} {
			env := []string{"TURNSTILE_BACKEND=" + other}
			for _, args := range [][]string{
				{"unlock", "guarded", "--force", "--yes"},
				{"run", "--key", "guarded", "--no-wait", "--", "true"},
			} {
				r := runTurnstile(t, env, args...)
				if r.code != exitUnavailable || !strings.Contains(r.stderr, "hint:") {
					t.Errorf("%s with other credentials: exit code %d, want %d with the permission hint; stderr:\n%s", args[0], r.code, exitUnavailable, r.stderr)
				}
				t.Logf("%s: %s", args[0], r.stderr)
				if strings.Contains(r.stderr, "QJZVWK") {
					t.Errorf("%s: stderr shows a password:\n%s", args[0], r.stderr)
				}
			}
		}
		r := runTurnstile(t, env, "status", "guarded")
		t.Logf("status: %s", r.stdout)
		if r.code != 0 || !strings.Contains(r.stdout, "guarded is held") {
			t.Errorf("status with the holder's credentials: exit code %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if r := holder.wait(t, time.Minute); r.code != 0 {
			t.Fatalf("holder: exit code %d, want 0 (its lock kept); stderr:\n%s", r.code, r.stderr)
		}
	})
}
