package service_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// newTokenLine runs "turnstile serve token" and returns the bearer value
// and the tokens file line it printed.
func newTokenLine(t *testing.T, name string, args ...string) (bearer, line string) {
	t.Helper()
	out, err := exec.Command(turnstileCmd.Path(t), append([]string{"serve", "token", name}, args...)...).Output()
	if err != nil {
		t.Fatalf("turnstile serve token: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("turnstile serve token printed %q", out)
	}
	return lines[0], lines[1]
}

// TestServeTokensReload: "turnstile serve --tokens FILE" takes the
// file's tokens only, reads the file again on SIGHUP, keeps the tokens
// it had when the new file is wrong, and never logs a secret.
func TestServeTokensReload(t *testing.T) {
	alpha, alphaLine := newTokenLine(t, "alpha", "--prefix", "a:")
	beta, betaLine := newTokenLine(t, "beta", "--prefix", "b:", "--role", "admin")
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# tenants\n" + alphaLine + "\n")
	p := startServe(t, "--tokens", file)
	ctx := ctxFor(t, time.Minute)
	try := func(bearer, key string) error {
		_, err := clientsOf(t, p.addr, withToken(bearer)).locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: key}))
		return err
	}
	if err := try(alpha, "a:1"); err != nil {
		t.Fatalf("alpha's token: %v", err)
	}
	wantReason(t, "beta before it is in the file", try(beta, "b:1"), connect.CodeUnauthenticated, "NO_TOKEN")

	write(betaLine + "\n")
	p.signal(t, syscall.SIGHUP)
	if err := proc.Poll(30*time.Second, 20*time.Millisecond, func() error { return try(beta, "b:1") }); err != nil {
		t.Fatalf("beta's token after SIGHUP: %v\n%s", err, p.output())
	}
	wantReason(t, "alpha after SIGHUP took it out", try(alpha, "a:1"), connect.CodeUnauthenticated, "NO_TOKEN")

	write("name=broken\n")
	p.signal(t, syscall.SIGHUP)
	if err := proc.Poll(30*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(p.output(), "the tokens file is wrong") {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("no word of the wrong file: %v\n%s", err, p.output())
	}
	if err := try(beta, "b:1"); err != nil {
		t.Fatalf("beta after a wrong file: %v", err)
	}
	for _, b := range []string{alpha, beta} {
		_, secret, _ := strings.Cut(b, ".")
		if strings.Contains(p.output(), secret) {
			t.Fatalf("the log shows a secret:\n%s", p.output())
		}
	}
}

// TestServeRefusesExposure: "turnstile serve" on an address other hosts
// reach, with neither TLS nor tokens, exits 64 and says why; --insecure
// serves it.
func TestServeRefusesExposure(t *testing.T) {
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "0.0.0.0:" + strconv.Itoa(port)
	out, err := exec.Command(turnstileCmd.Path(t), "serve", "--listen", addr).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 64 || !strings.Contains(string(out), "without TLS or tokens") {
		t.Fatalf("serve --listen %s: %v\n%s; want exit 64 and the reason", addr, err, out)
	}
	p := startServe(t, "--insecure") // on loopback, but the flag must be taken
	_ = p
}

// TestServeTLSFlags: --cert-file, --key-file and --ca-file make the
// instance serve TLS to clients with a certificate of the authority:
// a Go client over turnstiles:// with one is served.
func TestServeTLSFlags(t *testing.T) {
	certs := testcerts.New(t)
	p := startServe(t, "--cert-file", certs.ServerCert, "--key-file", certs.ServerKey, "--ca-file", certs.CA)
	if !strings.Contains(p.output(), "https://") {
		t.Fatalf("no https in %q", p.output())
	}
	ctx := ctxFor(t, 30*time.Second)
	c, err := turnstile.Open(ctx, "turnstiles://"+p.addr+"?ca_file="+certs.CA+"&cert_file="+certs.ClientCert+"&key_file="+certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "tls:cli")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if _, err := turnstile.Open(ctx, "turnstiles://"+p.addr+"?ca_file="+certs.CA); err == nil {
		t.Fatal("served a client without a certificate")
	}
}
