package etcd_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/tlstest"
)

// TestAuth runs a real etcd over TLS with client certificates and its
// authentication on: the user root, and users with the least a
// turnstile client needs — a role that may read and write the keys
// under its prefix — or less.
func TestAuth(t *testing.T) {
	const (
		rootPW  = "QJZVWKrootQJZVWK"
		userPW  = "QJZVWKuserQJZVWK"
		otherPW = "QJZVWKotherQJZVWK"
	)
	certs := testcerts.New(t)
	srv := testserver.StartEtcdTLS(t, certs)
	if err := srv.EnableAuth(rootPW,
		etcdproc.User{Name: "turnstile", Password: userPW, Prefix: etcd.DefaultPrefix},
		etcdproc.User{Name: "norole", Password: otherPW},
	); err != nil {
		t.Fatal(err)
	}
	secrets := tlstest.Secrets{rootPW, userPW, otherPW, "QJZVWK"}

	t.Run("LockAndToken", func(t *testing.T) {
		pwFile := tlstest.PasswordFile(t, userPW)
		ctx := ctxFor(t, 30*time.Second)
		a, err := turnstile.Open(ctx, tlsURL(srv, "turnstile:"+userPW, nil))
		if err != nil {
			t.Fatalf("Open as turnstile: %v", err)
		}
		defer a.Close()
		b, err := turnstile.Open(ctx, tlsURL(srv, "turnstile", url.Values{"password_file": {pwFile}}))
		if err != nil {
			t.Fatalf("Open as turnstile with password_file: %v", err)
		}
		defer b.Close()
		l, err := a.Acquire(ctx, "auth-key")
		if err != nil {
			t.Fatalf("Acquire as a user with readwrite on %s: %v", etcd.DefaultPrefix, err)
		}
		if _, err := b.TryAcquire(ctx, "auth-key"); !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
		}
		if err := l.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		first := l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		l2, err := b.Acquire(ctx, "auth-key") // through the queue
		if err != nil {
			t.Fatalf("Acquire through the queue: %v", err)
		}
		if first == 0 || l2.Token() <= first {
			t.Fatalf("tokens %d then %d: want increasing, above 0", first, l2.Token())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NoRole", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		c, err := turnstile.Open(ctx, tlsURL(srv, "norole:"+otherPW, nil))
		if err != nil {
			t.Fatalf("Open as a user without a role: %v", err)
		}
		defer c.Close()
		_, err = c.TryAcquire(ctx, "auth-key")
		if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), etcd.DefaultPrefix+"locks/auth-key") {
			t.Fatalf("TryAcquire as a user without a role = %v, want ErrPermission naming the lock key", err)
		}
		t.Logf("error: %v", err)
		secrets.CheckHidden(t, err)
		_, err = c.Acquire(ctx, "auth-key")
		if !errors.Is(err, turnstile.ErrPermission) {
			t.Fatalf("Acquire (queued) as a user without a role = %v, want ErrPermission", err)
		}
	})

	t.Run("OtherPrefix", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		c, err := turnstile.Open(ctx, tlsURL(srv, "turnstile:"+userPW, url.Values{"prefix": {"/elsewhere/"}}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.TryAcquire(ctx, "auth-key")
		if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), "/elsewhere/locks/auth-key") {
			t.Fatalf("TryAcquire outside the role's prefix = %v, want ErrPermission naming the lock key", err)
		}
		t.Logf("error: %v", err)
	})

	t.Run("WrongPassword", func(t *testing.T) {
		for _, userinfo := range []string{"turnstile:" + otherPW, "nosuchuser:" + userPW} {
			err := openErr(t, tlsURL(srv, userinfo, nil))
			tlstest.WantIn(t, err, "authentication failed")
			if errors.Is(err, turnstile.ErrInvalidURL) || errors.Is(err, turnstile.ErrPermission) {
				t.Fatalf("a wrong password is neither an invalid URL nor a missing permission: %v", err)
			}
			secrets.CheckHidden(t, err)
		}
	})

	t.Run("NoUser", func(t *testing.T) {
		// With client-cert-auth, etcd takes the certificate's common
		// name ("client") as the user when no password is given; there
		// is no such user.
		ctx := ctxFor(t, 30*time.Second)
		c, err := turnstile.Open(ctx, tlsURL(srv, "", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.TryAcquire(ctx, "auth-key"); err == nil {
			t.Fatal("TryAcquire without a user succeeded on an etcd with auth on")
		}
	})
}
