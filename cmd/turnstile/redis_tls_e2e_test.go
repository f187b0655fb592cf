//go:build unix

package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// tlsPassword is the password of the Redis ACL user of the TLS tests: no
// output may contain it.
const tlsPassword = "Cli-tls-pw-8d2c4a"

// TestRunRedisTLS: turnstile run takes a rediss:// URL with the TLS
// parameters in --backend and in TURNSTILE_BACKEND, and runs the command
// under a lock on a redis-server that speaks TLS only and requires
// client certificates; a bad ca_file is a usage error (64) before any
// connection, and a server certificate of another authority makes the
// store unavailable (69) with the certificate problem named.
func TestRunRedisTLS(t *testing.T) {
	certs := testcerts.New(t)
	srv := testserver.StartRedisTLS(t, certs, true)
	srv.MustDo(t, "ACL", "SETUSER", "turnstile", "on", ">"+tlsPassword, "~*", "&*", "+@all")
	esc := url.QueryEscape
	backend := func(host, ca string) string {
		return "rediss://turnstile:" + tlsPassword + "@" + host + "?ca_file=" + esc(ca) +
			"&cert_file=" + esc(certs.ClientCert) + "&key_file=" + esc(certs.ClientKey)
	}

	r := runTurnstile(t, nil, "run", "--backend", backend(srv.Addr(), certs.CA), "--key", "k", "--", "true")
	checkNoPassword(t, "run over TLS", r)
	if r.code != 0 {
		t.Fatalf("run over TLS: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}

	// The password from a file, the URL from the environment.
	pw := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pw, []byte(tlsPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("Environment", func(t *testing.T) {
		checkRunsUnderLock(t, strings.Replace(backend(srv.Addr(), certs.CA), ":"+tlsPassword+"@", "@", 1)+"&password_file="+esc(pw))
	})

	t.Run("MissingCAFile", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "no-such-ca.pem")
		// Nothing listens on port 1: a dial would be exit 69.
		r := runTurnstile(t, nil, "run", "--backend", backend("127.0.0.1:1", missing), "--key", "k", "--", "true")
		checkNoPassword(t, "missing ca_file", r)
		if r.code != exitUsage {
			t.Fatalf("missing ca_file: exit code %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
		}
		t.Logf("stderr:\n%s", r.stderr)
		first, _, _ := strings.Cut(r.stderr, "\n")
		for _, want := range []string{"ca_file", missing, "no such file"} {
			if !strings.Contains(first, want) {
				t.Errorf("missing ca_file: first line of stderr does not say %q:\n%s", want, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "connect") {
			t.Errorf("missing ca_file: turnstile dialled:\n%s", r.stderr)
		}
	})

	t.Run("OtherCA", func(t *testing.T) {
		start := time.Now()
		r := runTurnstile(t, nil, "run", "--backend", backend(srv.Addr(), certs.OtherCA), "--key", "k", "--", "true")
		checkNoPassword(t, "other CA", r)
		if r.code != exitUnavailable {
			t.Fatalf("server certificate of another CA: exit code %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
		}
		t.Logf("stderr:\n%s", r.stderr)
		if !strings.Contains(r.stderr, "certificate signed by unknown authority") {
			t.Errorf("server certificate of another CA: stderr does not name the certificate problem:\n%s", r.stderr)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("server certificate of another CA: took %v", took)
		}
	})
}
