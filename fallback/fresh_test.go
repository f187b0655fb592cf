package fallback_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// Fresh processes are Clients opened from the URL for one lock and closed
// after it, as every "turnstile run" does: each has a Backend and a
// breaker of its own, and knows nothing but what the pair keeps in its
// secondary.
const (
	freshTTL   = 2 * time.Second
	freshGrace = 10 * time.Second
	// freshBound is the bound the package documentation states for a
	// process started while the secondary serves (Open's wait for a
	// primary that does not answer, and a probe of it), and freshSlack
	// what a loaded machine may add: together they stay well under the
	// grace, which a process that knew nothing would have to wait.
	freshBound = 2 * time.Second
	freshSlack = 5 * time.Second
)

// forever is the CLI's backoff for --wait: retry until the context ends.
var forever = turnstile.WithBackoff(turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1})

type freshPair struct {
	t   *testing.T
	url string
}

func (f freshPair) open(ctx context.Context) (*turnstile.Client, error) {
	return turnstile.Open(ctx, f.url, turnstile.WithTTL(freshTTL))
}

func (f freshPair) mustOpen(ctx context.Context) *turnstile.Client {
	f.t.Helper()
	c, err := f.open(ctx)
	if err != nil {
		f.t.Fatalf("open a fresh process's pair: %v", err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

func serving(c *turnstile.Client) string {
	name, _ := c.Backend().(interface{ Serving() (string, bool) }).Serving()
	return name
}

// TestFreshProcessesDuringOutage: with the Redis primary killed, a fresh
// process opens the pair, moves it to PostgreSQL and is granted the lock
// there after the grace; later fresh processes learn from PostgreSQL that
// the pair has switched, exclude one another, and are served at once;
// when Redis is back, a fresh process's probe moves the pair back, a
// PostgreSQL lease held meanwhile is lost before Redis grants the key to
// anyone, and fresh processes lock in Redis again. No two holders
// overlap, and tokens increase in the order the holders held the key.
func TestFreshProcessesDuringOutage(t *testing.T) {
	srv := testserver.StartRedis(t)
	f := freshPair{t: t, url: fallbackURL(srv.URL(), pg.URL(), "grace="+freshGrace.String(), "open_timeout=1s", "pair=fresh")}
	ctx := ctxFor(t, 3*time.Minute)
	const key = "fresh"
	h := &holders{}

	// A long-running process holds the key in Redis when Redis dies.
	long := f.mustOpen(ctx)
	l, err := long.TryAcquire(ctx, key)
	if err != nil || !strings.HasPrefix(serving(long), "redis") {
		t.Fatalf("the healthy pair: %v, serving %q", err, serving(long))
	}
	h.enter(t, l, "long-running, in Redis")
	srv.Kill()
	killed := time.Now()
	go h.watch(l)

	// The first fresh process: Open succeeds with the primary down, and
	// its first failure to reach the primary moves the pair.
	first := f.mustOpen(ctx)
	l1, err := first.Acquire(ctx, key, forever)
	if err != nil {
		t.Fatalf("the first fresh process during the outage: %v", err)
	}
	took := time.Since(killed)
	h.enter(t, l1, "first fresh process")
	if !strings.HasPrefix(serving(first), "postgres") || took < freshGrace*49/50 {
		t.Fatalf("first fresh process granted by %q %v after the kill; want PostgreSQL, after the %v grace", serving(first), took, freshGrace)
	}
	t.Logf("the first fresh process was granted the lock by PostgreSQL %v after the kill (grace %v)", took.Round(time.Millisecond), freshGrace)

	// Another fresh process, while the first holds the key: refused, and
	// fast.
	start := time.Now()
	second := f.mustOpen(ctx)
	if _, err := second.TryAcquire(ctx, key); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("a second fresh process while the first holds the key: %v, want ErrNotAcquired", err)
	}
	if d := time.Since(start); d > freshBound+freshSlack {
		t.Errorf("a fresh process took %v to be refused, want within %v (+%v for a loaded machine)", d, freshBound, freshSlack)
	}
	h.leave(l1)
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A fresh process after the release: served by PostgreSQL at once,
	// without a grace. It holds the key, renewing, while Redis comes back.
	start = time.Now()
	third := f.mustOpen(ctx)
	l3, err := third.TryAcquire(ctx, key)
	d := time.Since(start)
	if err != nil {
		t.Fatalf("a fresh process after the release: %v", err)
	}
	h.enter(t, l3, "fresh process holding across the failback")
	if d > freshBound+freshSlack || !strings.HasPrefix(serving(third), "postgres") {
		t.Fatalf("a fresh process was granted the lock by %q %v after it started, want PostgreSQL within %v (+%v for a loaded machine)", serving(third), d, freshBound, freshSlack)
	}
	t.Logf("a fresh process opened the pair and was granted the lock by PostgreSQL in %v", d.Round(time.Millisecond))
	go h.watch(l3)

	// Redis is back: fresh processes contend for the key. One of them
	// probes Redis and moves the pair back; the lease held in PostgreSQL
	// cannot be renewed after that, and Redis grants nothing for the
	// grace.
	srv.Restart()
	restarted := time.Now()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var redisGrants atomic.Int32
	for range 3 {
		wg.Go(func() {
			for wctx.Err() == nil {
				c, err := f.open(wctx)
				if err != nil {
					if wctx.Err() == nil {
						t.Errorf("open a fresh process after Redis came back: %v", err)
					}
					return
				}
				actx, cancel := context.WithTimeout(wctx, 30*time.Second)
				l, err := c.Acquire(actx, key, forever)
				cancel()
				if err == nil {
					h.enter(t, l, "fresh process after the restart, "+serving(c))
					if strings.HasPrefix(serving(c), "redis") {
						redisGrants.Add(1)
					}
					time.Sleep(10 * time.Millisecond)
					h.leave(l)
					_ = l.Release(context.WithoutCancel(wctx))
				}
				_ = c.Close()
			}
		})
	}
	deadline := time.Now().Add(2*freshGrace + 30*time.Second)
	for redisGrants.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if redisGrants.Load() < 5 {
		t.Fatalf("Redis granted %d locks to fresh processes within %v of its restart", redisGrants.Load(), time.Since(restarted))
	}
	if cause := context.Cause(l3.Context()); !errors.Is(cause, turnstile.ErrLockLost) {
		t.Fatalf("the lease PostgreSQL granted before the failback ended with %v, want it lost", cause)
	}
	h.check(t)
}

// holders checks that no two leases on one key are held at once: a lease
// is held from its grant until its release or, when lost, the end of its
// validity (a lost lease's holder believes it holds the key until then).
type holders struct {
	mu     sync.Mutex
	in     map[*turnstile.Lease]string
	ends   map[*turnstile.Lease]time.Time // last known end of validity
	log    []string
	tokens []uint64
	bad    []string
}

func (h *holders) enter(t *testing.T, l *turnstile.Lease, who string) {
	t.Helper()
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.in == nil {
		h.in, h.ends = map[*turnstile.Lease]string{}, map[*turnstile.Lease]time.Time{}
	}
	for o, name := range h.in {
		if end, lost := h.ends[o]; !lost || end.After(now) {
			h.bad = append(h.bad, who+" was granted the key while "+name+" held it")
		}
	}
	for o := range h.in {
		if _, lost := h.ends[o]; lost {
			delete(h.in, o) // its validity has ended: it holds nothing
		}
	}
	h.in[l] = who
	if n := len(h.tokens); n > 0 && l.Token() <= h.tokens[n-1] {
		h.bad = append(h.bad, who+"'s token is not above the previous holder's")
	}
	h.tokens = append(h.tokens, l.Token())
	h.log = append(h.log, who)
}

func (h *holders) leave(l *turnstile.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.in, l)
}

// watch follows a lease that is held until it is lost, and keeps the end
// of its validity as its holder knew it.
func (h *holders) watch(l *turnstile.Lease) {
	end := time.Now().Add(l.Validity())
	for l.Context().Err() == nil {
		if v := l.Validity(); v > 0 {
			end = time.Now().Add(v)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, held := h.in[l]; held {
		h.ends[l] = end
	}
}

func (h *holders) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		t.Error(b)
	}
	t.Logf("%d holders in turn, no two at once: %s ...", len(h.log), strings.Join(h.log[:min(len(h.log), 5)], "; "))
}

// TestOpenBothDown: with neither store listening, Open fails at once with
// an error that names both stores and shows no password.
func TestOpenBothDown(t *testing.T) {
	const pw = "s3cr3tPW"
	ctx := ctxFor(t, 30*time.Second)
	start := time.Now()
	_, err := turnstile.Open(ctx, fallbackURL("redis://:"+pw+"@127.0.0.1:1", "postgres://u:"+pw+"@127.0.0.1:2/locks?sslmode=disable"))
	took := time.Since(start)
	if err == nil {
		t.Fatal("Open with both stores down succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"neither store", "primary", "127.0.0.1:1", "secondary", "127.0.0.1:2", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, pw) {
		t.Errorf("error shows the password: %s", msg)
	}
	// Refused connections answer at once: only a loaded machine is slow.
	if took > 10*time.Second {
		t.Errorf("Open took %v with both stores refusing connections", took)
	}
	t.Logf("both down: %v after %v", err, took.Round(time.Millisecond))
}

// TestOpenOneDown: Open succeeds with either store down. With the
// secondary down the primary serves; with a primary that accepts
// connections and never answers, Open waits for it about a second once
// the secondary has connected, and the first lock moves the pair.
func TestOpenOneDown(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srv := testserver.StartRedis(t)
	c, err := turnstile.Open(ctx, fallbackURL(srv.URL(), "postgres://u@127.0.0.1:1/locks?sslmode=disable", "pair=one-down"), turnstile.WithTTL(freshTTL))
	if err != nil {
		t.Fatalf("Open with the secondary down: %v", err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "one-down")
	if err != nil || !strings.HasPrefix(serving(c), "redis") {
		t.Fatalf("lock with the secondary down: %v, serving %q", err, serving(c))
	}
	_ = l.Release(ctx)

	// A listener that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	u := fallbackURL("redis://"+silent.Addr().String(), pg.URL(), "grace=2s", "pair=silent")
	start := time.Now()
	c2, err := turnstile.Open(ctx, u, turnstile.WithTTL(time.Second))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Open with a primary that never answers: %v", err)
	}
	defer c2.Close()
	if took > freshBound+freshSlack {
		t.Errorf("Open with a primary that never answers took %v, want about a second past the secondary's connection", took)
	}
	l2, err := c2.Acquire(ctx, "silent", forever)
	if err != nil || !strings.HasPrefix(serving(c2), "postgres") {
		t.Fatalf("lock with a primary that never answers: %v, serving %q", err, serving(c2))
	}
	_ = l2.Release(ctx)
	t.Logf("a primary that never answers: Open took %v, the first lock %v more", took.Round(time.Millisecond), time.Since(start.Add(took)).Round(time.Millisecond))
}
