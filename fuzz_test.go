package turnstile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/memory"
)

// FuzzOpen: Open never panics, and a URL it cannot use is refused with
// ErrInvalidURL (unparsable, without a scheme, or a mem:// URL with more
// than its scheme) or ErrUnknownScheme (no backend registered), naming
// what is wrong. Only mem:// is registered in
// this package's tests, so nothing is dialled.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{
		"mem://", "MEM://", "mem:", "redis://127.0.0.1:6379", "127.0.0.1:6379",
		"redis://[::1", "://x", "", "zookeeper9://x", "%zz://x", "a b://c",
		"mem://user:secret@host:1/path?q=1#frag", "redlock://[::1]:6379",
		"redis://a:b@[::1]:99999", "x:", ":", "/relative/path", "mem:opaque",
	} {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Open(ctx, raw)
		u, perr := parseURL(raw) // url.Parse, with lists of IPv6 hosts
		switch {
		case redact.Ambiguous(raw):
			// A user information with no clear end is refused before
			// anything else is looked at.
			if !errors.Is(err, ErrInvalidURL) || !errors.Is(err, redact.ErrAmbiguous) {
				t.Fatalf("Open(%q) = %v; its user information is ambiguous, want ErrInvalidURL and redact.ErrAmbiguous", raw, err)
			}
		case perr != nil:
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("Open(%q) = %v; it does not parse (%v), want ErrInvalidURL", raw, err, perr)
			}
		case u.Scheme == "":
			if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), "no scheme") {
				t.Fatalf("Open(%q) = %v; want ErrInvalidURL saying it has no scheme", raw, err)
			}
		case !strings.EqualFold(u.Scheme, "mem"):
			if !errors.Is(err, ErrUnknownScheme) {
				t.Fatalf("Open(%q) = %v; want ErrUnknownScheme", raw, err)
			}
			// A "scheme" may be a user name before a password
			// ("user:secret@host"): Open may mask it then.
			if !strings.ContainsAny(raw, "@") && !strings.Contains(err.Error(), strings.ToLower(u.Scheme)) {
				t.Fatalf("Open(%q) = %v; want the error to name the scheme %q", raw, err, u.Scheme)
			}
		case u.User != nil || u.Host != "" || u.Path != "" || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("Open(%q) = %v; mem:// takes nothing after the scheme, want ErrInvalidURL", raw, err)
			}
		default:
			if err != nil {
				t.Fatalf("Open(%q) = %v; want a mem:// client", raw, err)
			}
		}
		if c != nil {
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		}
	})
}

// FuzzKey: a key is accepted exactly when it has 1 to MaxKeyLen bytes, any
// bytes at all; a refused key gets ErrInvalidKey and an error that says
// why without repeating the key. An accepted key locks and unlocks, and
// excludes a second holder of the same key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"", "k", "lock:inventory:{w1}", "\x00", "\xff\xfe", strings.Repeat("k", MaxKeyLen), strings.Repeat("k", MaxKeyLen+1), "}", "\\", "a/b/../c"} {
		f.Add(s)
	}
	c, err := New(memory.New(), WithTTL(time.Minute))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key string) {
		valid := len(key) >= 1 && len(key) <= MaxKeyLen
		err := checkKey(key)
		if valid != (err == nil) {
			t.Fatalf("checkKey(%d bytes) = %v; want valid=%v", len(key), err, valid)
		}
		l, err := c.TryAcquire(ctx, key)
		if !valid {
			if !errors.Is(err, ErrInvalidKey) || l != nil {
				t.Fatalf("TryAcquire(%d bytes) = %v, %v; want ErrInvalidKey", len(key), l, err)
			}
			if len(key) > 8 && strings.Contains(err.Error(), key) {
				t.Fatalf("error %q repeats the %d-byte key", err, len(key))
			}
			if _, err := c.AcquireAll(ctx, []string{"other", key}); !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("AcquireAll with a %d-byte key: %v; want ErrInvalidKey", len(key), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", key, err)
		}
		if l2, err := c.TryAcquire(ctx, key); !errors.Is(err, ErrNotAcquired) {
			if l2 != nil {
				_ = l2.Release(ctx)
			}
			t.Fatalf("second TryAcquire(%q) = %v; want ErrNotAcquired", key, err)
		}
		if _, err := sortedKeys([]string{key, key}); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("the key %q twice: %v; want ErrInvalidKey", key, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
	})
}
