package zookeeper_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/badurl"
	"github.com/turnstilelock/turnstile/zookeeper"
)

func TestOpenURL(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	c, err := turnstile.Open(ctx, serverURL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "url")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	chrooted, err := turnstile.Open(ctx, "zookeeper://"+srv.Addr()+"/app/one?session_timeout=2s", turnstile.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer chrooted.Close()
	if _, err := chrooted.TryAcquire(ctx, "url"); err != nil {
		t.Fatalf("the same key under a chroot is another lock: %v", err)
	}
}

func TestBadURLs(t *testing.T) {
	badurl.Refused(t,
		"zookeeper://",
		"zookeeper://h:0",
		"zookeeper://h:99999",
		"zookeeper://h:x",
		"zookeeper://a,,b",
		"zookeeper://user@h",
		"zookeeper://h/a//b",
		"zookeeper://h/./b",
		"zookeeper://h?session_timeout=0s",
		"zookeeper://h?session_timeout=soon",
		"zookeeper://h?session_timeout=1s&session_timeout=2s",
		"zookeeper://h?colour=red",
		"zookeeper://h#frag",
		"zookeeper:h",
	)
}

// TestOpenSessionFromTTL: Open gives the session the Client's TTL when
// the URL sets no session_timeout (at least MinSessionTimeout), keeps an
// explicit one, and refuses a TTL longer than it, before dialling.
func TestOpenSessionFromTTL(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	for _, tc := range []struct {
		url  string
		ttl  time.Duration
		want time.Duration
	}{
		{"zookeeper://" + srv.Addr(), 3 * time.Second, 3 * time.Second},
		{"zookeeper://" + srv.Addr(), 500 * time.Millisecond, zookeeper.MinSessionTimeout},
		{"zookeeper://" + srv.Addr(), 0, turnstile.DefaultTTL},
		{"zookeeper://" + srv.Addr() + "?session_timeout=5s", 3 * time.Second, 5 * time.Second},
		{"zookeeper://" + srv.Addr() + "?session_timeout=3s", 3 * time.Second, 3 * time.Second},
	} {
		var opts []turnstile.Option
		if tc.ttl > 0 {
			opts = append(opts, turnstile.WithTTL(tc.ttl))
		}
		c, err := turnstile.Open(ctx, tc.url, opts...)
		if err != nil {
			t.Fatalf("Open(%q, ttl %v): %v", tc.url, tc.ttl, err)
		}
		got := c.Backend().(*zookeeper.Backend).SessionTimeout()
		_ = c.Close()
		if got != tc.want {
			t.Errorf("Open(%q, ttl %v): session timeout %v, want %v", tc.url, tc.ttl, got, tc.want)
		}
	}

	// Refused before any dial: the address is one nobody listens on.
	_, err := turnstile.Open(ctx, "zookeeper://127.0.0.1:1?session_timeout=2s", turnstile.WithTTL(3*time.Second))
	if !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Fatalf("TTL 3s over session_timeout=2s: Open = %v, want ErrInvalidTTL", err)
	}
	for _, want := range []string{"3s", "session_timeout=2s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
