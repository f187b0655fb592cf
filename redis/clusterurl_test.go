package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// testClusterURL: turnstile.Open reaches the cluster from a list of its
// nodes, or from any one of them; a list cannot select a database.
func testClusterURL(t *testing.T, cl *testserver.RedisCluster) {
	ctx := ctxFor(t, time.Minute)
	addrs := cl.Addrs()
	for _, u := range []string{
		cl.URL(),
		"redis://" + addrs[2] + "," + addrs[0] + "/0?prefix=url:",
		"redis://" + addrs[1],
	} {
		c, err := turnstile.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		for _, k := range []string{"url:a", "url:b", "url:c", "url:d"} {
			l, err := c.TryAcquire(ctx, k)
			if err != nil {
				t.Fatalf("Open(%q): TryAcquire(%s): %v", u, k, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Open(%q): Release(%s): %v", u, k, err)
			}
		}
		_ = c.Close()
	}
	u := "redis://" + strings.Join(addrs, ",") + "/1"
	if c, err := turnstile.Open(ctx, u); !errors.Is(err, turnstile.ErrInvalidURL) {
		if c != nil {
			_ = c.Close()
		}
		t.Errorf("Open(%q) = %v, want ErrInvalidURL", u, err)
	}
}

// TestBadClusterURLs: a malformed host list is refused before any
// connection is made.
func TestBadClusterURLs(t *testing.T) {
	checkBadURLs(t, []string{
		"redis://h1:7000,,h2:7001",
		"redis://h1:7000,",
		"redis://,h1:7000",
		"redis://,",
		"redis://h1:x,h2:7001",
		"redis://h1:0,h2:7001",
		"redis://h1:65536,h2:7001",
		"redis://h1:7000,h2:7001,h3:notaport",
		"redis://h1:7000:7001,h2:7002",
		"redis://h1:7000,h2:7001/2",
		"rediss://h1:7000,h2:7001/3",
	})
}
