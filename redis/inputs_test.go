package redis_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redis"
)

func TestNilClients(t *testing.T) {
	if _, err := redis.New(nil); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("New(nil) = %v, want ErrInvalidOption", err)
	}
	if _, err := redis.NewGoRedis(nil); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("NewGoRedis(nil) = %v, want ErrInvalidOption", err)
	}
	if _, err := redis.NewGoRedis((*goredis.Client)(nil)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("NewGoRedis((*Client)(nil)) = %v, want ErrInvalidOption", err)
	}
	if _, err := redis.NewGoRedis((*goredis.ClusterClient)(nil)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("NewGoRedis((*ClusterClient)(nil)) = %v, want ErrInvalidOption", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := redis.Dial(nil, rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}}); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("Dial(nil ctx) = %v, want ErrInvalidOption", err)
	}
}

func TestBadOptions(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer c.Close()
	for name, opt := range map[string]redis.Option{
		"nil":               nil,
		"prefix with {":     redis.WithPrefix("app{x"),
		"prefix with }":     redis.WithPrefix("app}"),
		"zero grace":        redis.WithFenceGrace(0),
		"negative grace":    redis.WithFenceGrace(-time.Second),
		"grace over a day":  redis.WithFenceGrace(25 * time.Hour),
		"sub-ms grace":      redis.WithFenceGrace(time.Microsecond),
		"prefix over limit": redis.WithPrefix(string(make([]byte, turnstile.MaxKeyLen+1))),
	} {
		if _, err := redis.NewGoRedis(c, opt); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("%s: NewGoRedis = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := redis.NewGoRedis(c, redis.WithPrefix("app:"), redis.WithFenceGrace(time.Second)); err != nil {
		t.Errorf("good options: %v", err)
	}
}

// checkBadURLs checks that Open refuses each of urls with
// ErrInvalidURL, before any connection.
func checkBadURLs(t *testing.T, urls []string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for _, u := range urls {
		start := time.Now()
		c, err := turnstile.Open(ctx, u)
		if c != nil {
			_ = c.Close()
		}
		if !errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", u, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Open(%q) took %v: bad URLs must fail before any connection", u, took)
		}
	}
}

func TestBadURLs(t *testing.T) {
	checkBadURLs(t, []string{
		"redis://host:notaport",
		"redis://host:0",
		"redis://host:65536",
		"redis://h/abc",
		"redis://h/-1",
		"redis://h/0/1",
		"redis://h:6379/?unknown=1",
		"redis://h?dial_timeout=soon",
		"redis://h?dial_timeout=-1s",
		"redis://h?dial_timeout=1s&dial_timeout=2s",
		"redis://h?fence_grace=0s",
		"redis://h?fence_grace=x",
		"redis://h?protocol=4",
		"redis://h?flush_delay=x",
		"redis://h?flush_delay=-1us",
		"redis://h?flush_delay=2ms",
		"redis://h?prefix=a%7Bb",
		"redis://h#frag",
		"redis:opaque",
	})
}

// TestFlushDelay: clients opened from a URL batch concurrent calls'
// writes for DefaultFlushDelay unless the URL says otherwise; 0 is off.
func TestFlushDelay(t *testing.T) {
	for u, want := range map[string]time.Duration{
		"redis://h":                  redis.DefaultFlushDelay,
		"redis://h?flush_delay=50us": 50 * time.Microsecond,
		"redis://h?flush_delay=0":    0,
		"redis://h?flush_delay=1ms":  time.Millisecond,
	} {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		opt, _, err := redis.ParseParsedURL(parsed)
		if err != nil || opt.MaxFlushDelay != want {
			t.Errorf("%s: flush delay %v (%v), want %v", u, opt.MaxFlushDelay, err, want)
		}
	}
}

// TestDialFailsInTime: nothing listens, or a server never answers: Open
// returns an error within its dial timeout instead of hanging.
func TestDialFailsInTime(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := l.Addr().String() // accepts (in the kernel backlog), never answers
	defer l.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		url   string
		limit time.Duration
	}{
		{"redis://" + refused, 6 * time.Second},
		{"redis://" + silent + "?dial_timeout=300ms", 2 * time.Second},
	} {
		start := time.Now()
		c, err := turnstile.Open(ctxFor(t, time.Minute), tc.url)
		if err == nil {
			_ = c.Close()
			t.Errorf("Open(%q) succeeded without a server", tc.url)
			continue
		}
		if took := time.Since(start); took > tc.limit {
			t.Errorf("Open(%q) took %v, want under %v", tc.url, took, tc.limit)
		}
	}

	// The context's deadline bounds dialling too.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if b, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{silent}}); err == nil {
		_ = b.Close()
		t.Error("Dial to a silent server succeeded")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Dial with a 200ms context took %v", took)
	}
}

// fixedBackoff retries after the same pause every time.
type fixedBackoff time.Duration

func (f fixedBackoff) Delay(int) (time.Duration, bool) { return time.Duration(f), true }

// TestOpenURL: a good URL with every parameter opens a working client.
func TestOpenURL(t *testing.T) {
	srv, ctx := startRedis(t)
	c, err := turnstile.Open(ctx, srv.URL()+"/2?dial_timeout=2s&prefix=app:&fence_grace=1s&protocol=2")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "url")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if got := srv.MustDo(t, "SELECT", "2"); got != "OK" {
		t.Fatalf("SELECT 2 = %q", got)
	}
	// testserver.Do uses a fresh connection per command, so look in db 2
	// with a script that selects it.
	owner := srv.MustDo(t, "EVAL", "redis.call('SELECT', 2) return redis.call('GET', KEYS[1])", "1", "app:{url}")
	if owner != l.Owner() {
		t.Fatalf("db 2 key app:{url} holds %q, want the lease owner %q", owner, l.Owner())
	}
	pttl, _ := strconv.Atoi(srv.MustDo(t, "EVAL", "redis.call('SELECT', 2) return redis.call('PTTL', KEYS[1])", "1", "app:{url}:fence"))
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if want := int((turnstile.DefaultTTL + time.Second) / time.Millisecond); pttl <= 0 || pttl > want {
		t.Fatalf("fence PTTL %d ms, want at most ttl + fence_grace = %d", pttl, want)
	}
	if name := c.Backend().(interface{ Name() string }).Name(); name != "redis "+srv.Addr() {
		t.Fatalf("Name() = %q", name)
	}
	// protocol=2: release notices arrive on a subscription connection of
	// their own, and wake a waiter long before its backoff would.
	holder, err := c.TryAcquire(ctx, "url")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); _ = holder.Release(ctx) }()
	slow := turnstile.WithBackoff(fixedBackoff(10 * time.Second))
	start := time.Now()
	w, err := c.Acquire(ctx, "url", slow, turnstile.WithoutCoalescing())
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("waiter woke after %v: the release notice did not arrive", took)
	}
	_ = w.Release(ctx)
}
