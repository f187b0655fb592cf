// Package tlstest holds the checks that the TLS and authentication tests
// of the store modules share: an Open that must fail, a URL that must be
// refused as invalid before anything is dialled, errors that must name
// what went wrong without showing a password, and locks taken with
// increasing fencing tokens over a secured connection.
package tlstest

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// Secrets are the passwords of a test, and any marker they share, which
// no error may show.
type Secrets []string

// CheckHidden fails t unless err's message shows none of s. A nil err
// shows nothing.
func (s Secrets) CheckHidden(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, secret := range s {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows a password: %v", err)
			return
		}
	}
}

// OpenFails opens raw with a context of timeout, which must fail, logs
// the error and returns it, having checked that it shows none of s.
func (s Secrets) OpenFails(t testing.TB, timeout time.Duration, raw string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := turnstile.Open(ctx, raw)
	if err == nil {
		_ = c.Close()
		t.Fatalf("Open(%s) succeeded", raw)
	}
	t.Logf("error: %v", err)
	s.CheckHidden(t, err)
	return err
}

// InvalidURL opens raw as OpenFails does, which must fail at once
// (within 2 s, before anything is dialled) with turnstile.ErrInvalidURL
// and an error that says each of want; it returns the error.
func (s Secrets) InvalidURL(t testing.TB, raw string, want ...string) error {
	t.Helper()
	start := time.Now()
	err := s.OpenFails(t, 10*time.Second, raw)
	if !errors.Is(err, turnstile.ErrInvalidURL) {
		t.Errorf("Open(%s) = %v, want ErrInvalidURL", raw, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Open(%s) took %v: a bad URL must fail before anything is dialled", raw, took)
	}
	WantIn(t, err, want...)
	return err
}

// WantIn fails t unless err's message contains every one of want.
func WantIn(t testing.TB, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// Refused opens raw as OpenFails does, and checks that the error says
// each of want and is neither turnstile.ErrInvalidURL nor
// turnstile.ErrPermission: a server that refused the connection, its
// certificate or its credentials.
func (s Secrets) Refused(t testing.TB, raw string, want ...string) {
	t.Helper()
	err := s.OpenFails(t, 20*time.Second, raw)
	WantIn(t, err, want...)
	if errors.Is(err, turnstile.ErrInvalidURL) || errors.Is(err, turnstile.ErrPermission) {
		t.Errorf("Open: %v; want a connection error", err)
	}
}

// InvalidFileParams runs InvalidURL as a subtest of t, named by the
// query, for base (a URL that ends in '?' or '&') with each query of a
// missing, empty or non-PEM ca_file, a cert_file or key_file alone, a
// cert_file and key_file that do not match, and a server_name that is no
// host name, with the files of c; each error must say what is wrong.
func (s Secrets) InvalidFileParams(t *testing.T, base string, c *testcerts.Set) {
	t.Helper()
	q := url.QueryEscape
	for _, tc := range []struct{ q, want string }{
		{"ca_file=" + q(c.Missing), "ca_file"},
		{"ca_file=" + q(c.NotPEM), "no PEM certificate"},
		{"ca_file=", "ca_file"},
		{"cert_file=" + q(c.ClientCert), "cert_file without key_file"},
		{"key_file=" + q(c.ClientKey), "key_file without cert_file"},
		{"cert_file=" + q(c.ClientCert) + "&key_file=" + q(c.ServerKey), "cert_file"},
		{"server_name=a%20b", "server_name"},
	} {
		t.Run(tc.q, func(t *testing.T) { s.InvalidURL(t, base+tc.q, tc.want) })
	}
}

// PasswordFile writes pw and a newline into a file of its own, readable
// by its owner only, and returns its path.
func PasswordFile(t testing.TB, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Query is a URL query of name=value pairs, the values escaped.
func Query(pairs ...string) string {
	v := make([]string, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		v = append(v, pairs[i]+"="+url.QueryEscape(pairs[i+1]))
	}
	return strings.Join(v, "&")
}

// LockOnce opens raw, takes the lock of key, checks that its fencing
// token is not 0, releases it and closes the client.
func LockOnce(t testing.TB, raw, key string) {
	t.Helper()
	ctx, _, l, done := openAndLock(t, 20*time.Second, raw, key)
	defer done()
	if l.Token() == 0 {
		t.Fatal("lease with token 0")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// LockAndFence opens two clients of raw and, for each of keys, takes its
// lock with the first, calls held (unless it is nil) while the lock is
// held, checks that the second client cannot take it, releases it, and
// takes it with the second client, whose fencing token must be greater
// than the first's, which must not be 0; then releases it again.
func LockAndFence(t testing.TB, raw string, held func(key string), keys ...string) {
	t.Helper()
	ctx, c, done := open(t, time.Minute, raw)
	defer done()
	_, other, doneOther := open(t, time.Minute, raw)
	defer doneOther()
	for _, k := range keys {
		l, err := c.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("TryAcquire(%s): %v", k, err)
		}
		if held != nil {
			held(k)
		}
		if l2, err := other.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
			if l2 != nil {
				_ = l2.Release(ctx)
			}
			t.Fatalf("a second client's TryAcquire(%s) of a held lock = %v, want ErrNotAcquired", k, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%s): %v", k, err)
		}
		l2, err := other.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("TryAcquire(%s) after release: %v", k, err)
		}
		if l.Token() == 0 || l2.Token() <= l.Token() {
			t.Errorf("%s: fencing token %d after %d: want it greater, and above 0", k, l2.Token(), l.Token())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatalf("Release(%s): %v", k, err)
		}
	}
}

// EveryCall opens raw and, through it, takes the lock of key, extends
// it, inspects it, lists the locks, force-releases key and lets the
// lease go, then closes the client: the calls a least-privilege account
// must be allowed, operator calls included. Only the release's error is
// not checked, as the force release ended the lease.
func EveryCall(t testing.TB, raw, key string) {
	t.Helper()
	ctx, c, l, done := openAndLock(t, 30*time.Second, raw, key)
	defer done()
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inspect(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.List(ctx, "", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceRelease(ctx, key); err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// open opens raw with a context of timeout and returns the context, the
// client, and a function that closes the client and cancels the context.
func open(t testing.TB, timeout time.Duration, raw string) (context.Context, *turnstile.Client, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	c, err := turnstile.Open(ctx, raw)
	if err != nil {
		cancel()
		t.Fatalf("Open: %v", err)
	}
	return ctx, c, func() {
		_ = c.Close()
		cancel()
	}
}

// openAndLock opens raw as open does and takes the lock of key through
// the client.
func openAndLock(t testing.TB, timeout time.Duration, raw, key string) (context.Context, *turnstile.Client, *turnstile.Lease, func()) {
	t.Helper()
	ctx, c, done := open(t, timeout, raw)
	l, err := c.TryAcquire(ctx, key)
	if err != nil {
		done()
		t.Fatalf("TryAcquire: %v", err)
	}
	return ctx, c, l, done
}
