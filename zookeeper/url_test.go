package zookeeper_test

import (
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
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
	chrooted, err := turnstile.Open(ctx, "zookeeper://"+srv.Addr()+"/app/one?session_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer chrooted.Close()
	if _, err := chrooted.TryAcquire(ctx, "url"); err != nil {
		t.Fatalf("the same key under a chroot is another lock: %v", err)
	}
}

func TestBadURLs(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	for _, u := range []string{
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
	} {
		t.Run(u, func(t *testing.T) {
			if _, err := turnstile.Open(ctx, u); !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("Open(%q) = %v, want ErrInvalidURL", u, err)
			}
		})
	}
}
