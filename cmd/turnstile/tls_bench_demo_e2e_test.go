package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestBenchAndDemoOverTLS: turnstile bench and turnstile demo take a
// rediss:// URL with the TLS parameters and password_file as run does —
// bench's INFO counters and demo's own connections included — on a
// redis-server that listens on TLS only and wants client certificates.
func TestBenchAndDemoOverTLS(t *testing.T) {
	t.Parallel()
	certs := testcerts.New(t)
	srv := testserver.StartRedisTLS(t, certs, true)
	srv.MustDo(t, "ACL", "SETUSER", "turnstile", "on", ">"+tlsPassword, "~*", "&*", "+@all")
	pw := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pw, []byte(tlsPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	esc := url.QueryEscape
	backend := "rediss://turnstile@" + srv.Addr() + "?ca_file=" + esc(certs.CA) +
		"&cert_file=" + esc(certs.ClientCert) + "&key_file=" + esc(certs.ClientKey) + "&password_file=" + esc(pw)

	r := runTurnstile(t, nil, "bench", "--backend", backend, "--duration", "1s", "--only", "uncontended/c=1$")
	checkNoPassword(t, "bench over TLS", r)
	if r.code != exitOK || !strings.Contains(r.stdout, "uncontended") {
		t.Errorf("bench over TLS: exit %d, want 0 and a cell; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	r = runTurnstile(t, nil, "demo", "--backend", backend, "owner-id")
	checkNoPassword(t, "demo over TLS", r)
	if r.code != exitOK {
		t.Errorf("demo owner-id over TLS: exit %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// Without the client certificate the server refuses the handshake:
	// bench says so before any cell.
	plain := strings.NewReplacer("&cert_file="+esc(certs.ClientCert), "", "&key_file="+esc(certs.ClientKey), "").Replace(backend)
	r = runTurnstile(t, nil, "bench", "--backend", plain, "--duration", "1s", "--only", "uncontended/c=1$")
	checkNoPassword(t, "bench without a client certificate", r)
	if r.code != exitUnavailable {
		t.Errorf("bench without a client certificate: exit %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
}
