package redlock_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/badurl"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

func TestBadURLs(t *testing.T) {
	badurl.Refused(t,
		"redlock://",
		"redlock:127.0.0.1:1",
		"redlock://127.0.0.1:1,,127.0.0.1:2",
		"redlock://127.0.0.1:0",
		"redlock://:6379",
		"redlock://127.0.0.1:1/x",
		"redlock://127.0.0.1:1#frag",
		"redlock://127.0.0.1:1?node_timeout=fast",
		"redlock://127.0.0.1:1?node_timeout=1h",
		"redlock://127.0.0.1:1?quarantine=-1s",
		"redlock://127.0.0.1:1?fencing=maybe",
		"redlock://127.0.0.1:1?dial_timeout=0s",
		"redlock://127.0.0.1:1?flush_delay=-1us",
		"redlock://127.0.0.1:1?flush_delay=2ms",
		"redlock://127.0.0.1:1?flush_delay=x",
		"redlock://127.0.0.1:1?colour=blue",
		"redlock://127.0.0.1:1?quarantine=1s&quarantine=2s",
		"redlock://h1:1,h2:x",
	)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := turnstile.Open(ctx, "redlock://127.0.0.1:1,127.0.0.1:1"); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("a node given twice: %v, want ErrInvalidOption", err)
	}
	for _, u := range []string{"redlock://127.0.0.1:1?prefix=a{b", "redlock://127.0.0.1:1?fence_grace=0s", "redlock://127.0.0.1:1?node_timeout=1ns"} {
		if _, err := turnstile.Open(ctx, u); !errors.Is(err, turnstile.ErrInvalidURL) || !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL and ErrInvalidOption", u, err)
		}
	}
}

// TestOpenURL: a Redlock opens from its URL with a minority of its servers
// down, and refuses to open when a quorum cannot be reached.
func TestOpenURL(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srvs := startNodes(t, 3)
	srvs[2].Kill()
	c, err := turnstile.Open(ctx, redlockURL(srvs, "quarantine=0&node_timeout=100ms&prefix=app:&fence_grace=5s&dial_timeout=2s&fencing=on&flush_delay=0"))
	if err != nil {
		t.Fatalf("Open with 1 of 3 down: %v", err)
	}
	defer c.Close()
	if name := c.Backend().(interface{ Name() string }).Name(); !strings.HasPrefix(name, "redlock(redis ") || strings.Count(name, "redis ") != 3 {
		t.Fatalf("Name() = %q", name)
	}
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire with 1 of 3 down: %v", err)
	}
	if got, err := srvs[0].Do("EXISTS", "app:{k}"); err != nil || got != "1" {
		t.Fatalf("the prefix did not reach the nodes: EXISTS app:{k} = %q, %v", got, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	srvs[1].Kill()
	_, err = turnstile.Open(ctx, redlockURL(srvs, "quarantine=0&dial_timeout=1s"))
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Open with 2 of 3 down = %v, want ErrNoQuorum", err)
	}
}

// TestURLFlushDelay: every node client batches concurrent writes for
// redis.DefaultFlushDelay unless the URL says otherwise.
func TestURLFlushDelay(t *testing.T) {
	for u, want := range map[string]time.Duration{
		"redlock://h1:1,h2:2,h3:3":                  redis.DefaultFlushDelay,
		"redlock://h1:1,h2:2,h3:3?flush_delay=0":    0,
		"redlock://h1:1,h2:2,h3:3?flush_delay=80us": 80 * time.Microsecond,
	} {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		_, opt, _, err := redlock.ParseURL(parsed)
		if err != nil || opt.MaxFlushDelay != want {
			t.Errorf("%s: flush delay %v (%v), want %v", u, opt.MaxFlushDelay, err, want)
		}
	}
}

// TestOpenIPv6List: a list of bracketed IPv6 nodes reaches the Redlock
// through turnstile.Open (net/url alone refuses it); with nothing
// listening there, opening fails to connect, not to read the URL.
func TestOpenIPv6List(t *testing.T) {
	_, err := turnstile.Open(ctxFor(t, 30*time.Second), "redlock://:pw@[::1]:1,[::1]:2,[::1]:3?dial_timeout=200ms")
	if err == nil || errors.Is(err, turnstile.ErrInvalidURL) || strings.Contains(err.Error(), "pw@") {
		t.Fatalf("Open = %v; want a connection error without the password", err)
	}
	if !strings.Contains(err.Error(), "[::1]:1") {
		t.Errorf("the error does not name the node: %v", err)
	}
}
