package fallback_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// grant is one lock grant seen by the workers.
type grant struct {
	at    time.Time
	store string
	token uint64
}

// failover drives workers that contend for one key through a fallback
// Backend and checks, non-atomically, that they never overlap.
type failover struct {
	b   *fallback.Backend
	key string
	ttl time.Duration

	inside   atomic.Int32 // holders that believe they hold the key
	overlaps atomic.Int32 // times inside went above 1
	sections atomic.Int64 // critical sections completed
	counter  int64        // read-modify-written by holders only

	mu     sync.Mutex
	grants []grant
	opened time.Time // closed->open
	closed time.Time // half-open->closed
}

func (f *failover) enter() {
	if f.inside.Add(1) != 1 {
		f.overlaps.Add(1)
	}
}

func (f *failover) onChange(from, to fallback.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case to == fallback.StateOpen && from == fallback.StateClosed:
		f.opened = time.Now()
	case to == fallback.StateClosed:
		f.closed = time.Now()
	}
}

// worker acquires, runs a critical section of read-modify-write on the
// counter, and releases, until ctx ends.
func (f *failover) worker(ctx context.Context, owner string) {
	for ctx.Err() == nil {
		callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		tok, ok, err := f.b.Acquire(callCtx, f.key, owner, f.ttl)
		cancel()
		if err != nil || !ok {
			sleepCtx(ctx, 10*time.Millisecond)
			continue
		}
		store, _ := f.b.Serving()
		f.enter()
		v := f.counter
		time.Sleep(2 * time.Millisecond)
		f.counter = v + 1
		f.sections.Add(1)
		if time.Since(start) >= f.ttl {
			f.overlaps.Add(1) // the section outlived the lease: the check is void
		}
		f.mu.Lock()
		f.grants = append(f.grants, grant{at: time.Now(), store: store, token: tok})
		f.mu.Unlock()
		f.inside.Add(-1)
		relCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, _ = f.b.Release(relCtx, f.key, owner)
		cancel()
		sleepCtx(ctx, 5*time.Millisecond)
	}
}

// holder keeps a lease it already holds, renewing it every ttl/4, and
// believes it holds the key until ttl after the start of its last good
// renewal, as turnstile's watchdog does.
func (f *failover) holder(ctx context.Context, owner string, validUntil time.Time) {
	defer f.inside.Add(-1)
	for {
		sleepCtx(ctx, f.ttl/4)
		if ctx.Err() != nil {
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		ok, err := f.b.Extend(callCtx, f.key, owner, f.ttl)
		cancel()
		if err != nil || !ok {
			sleepCtx(ctx, time.Until(validUntil))
			return
		}
		validUntil = start.Add(f.ttl)
	}
}

// firstGrant returns the first grant by a store named like prefix at or
// after since.
func (f *failover) firstGrant(prefix string, since time.Time) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.grants {
		if !g.at.Before(since) && strings.HasPrefix(g.store, prefix) {
			return g.at, true
		}
	}
	return time.Time{}, false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TestFailoverRedisToPostgres is the Done-when test: with a lock held in
// Redis, the Redis server dies; PostgreSQL serves new acquisitions within
// breaker trip time + grace; nobody ever holds the key twice; and once
// Redis is back, acquisitions return to it.
func TestFailoverRedisToPostgres(t *testing.T) {
	const (
		ttl         = time.Second
		grace       = 2 * time.Second
		openTimeout = 500 * time.Millisecond
		workers     = 8
	)
	srv := testserver.StartRedis(t)
	f := &failover{key: "fallback:" + t.Name(), ttl: ttl}
	b, err := fallback.New(dialRedis(t, srv), dialPostgres(t),
		fallback.WithTripAfter(3), fallback.WithOpenTimeout(openTimeout), fallback.WithGrace(grace),
		fallback.WithPair("failover-test"), fallback.WithOnStateChange(f.onChange), fallback.WithLogger(slog.New(slog.NewTextHandler(tWriter{t}, nil))))
	if err != nil {
		t.Fatalf("fallback.New: %v", err)
	}
	f.b = b

	// A lock held in Redis.
	start := time.Now()
	if _, ok, err := b.Acquire(ctxFor(t, 5*time.Second), f.key, "holder", ttl); !ok || err != nil {
		t.Fatalf("holder Acquire = %v, %v", ok, err)
	}
	if n, err := srv.Do("EXISTS", "{"+f.key+"}"); err != nil || n != "1" {
		t.Fatalf("Redis does not hold the lock: EXISTS = %q, %v", n, err)
	}
	f.enter()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.holder(ctx, "holder", start.Add(ttl)) })
	for i := range workers {
		wg.Go(func() { f.worker(ctx, "worker-"+strconv.Itoa(i)) })
	}
	defer func() { stop(); wg.Wait() }()

	time.Sleep(600 * time.Millisecond) // the holder renews; workers are refused
	killed := time.Now()
	srv.Kill()

	pgAt := waitGrant(t, f, "postgres", killed, 10*time.Second)
	f.mu.Lock()
	opened := f.opened
	f.mu.Unlock()
	if opened.IsZero() || opened.Sub(killed) > 3*time.Second {
		t.Fatalf("breaker opened %v after the kill (zero: never)", opened.Sub(killed))
	}
	if d := pgAt.Sub(opened); d < grace || d > grace+time.Second {
		t.Errorf("first PostgreSQL grant %v after the breaker opened; want within [grace %v, grace + 1 s]", d, grace)
	}
	t.Logf("killed Redis; breaker opened after %v, PostgreSQL granted after %v more", opened.Sub(killed), pgAt.Sub(opened))

	time.Sleep(500 * time.Millisecond)
	restarted := time.Now()
	srv.Restart()
	redisAt := waitGrant(t, f, "redis", restarted, 10*time.Second)
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed.IsZero() || redisAt.Sub(closed) < grace {
		t.Errorf("Redis granted %v after the breaker closed; want at least grace %v", redisAt.Sub(closed), grace)
	}
	t.Logf("restarted Redis; breaker closed after %v, Redis granted after %v more", closed.Sub(restarted), redisAt.Sub(closed))
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()

	if got := b.State(); got != fallback.StateClosed {
		t.Fatalf("State = %v, want closed", got)
	}
	// A new acquisition lands in Redis.
	key2 := f.key + ":after"
	if _, ok, err := b.Acquire(ctxFor(t, 5*time.Second), key2, "late", ttl); !ok || err != nil {
		t.Fatalf("Acquire after recovery = %v, %v", ok, err)
	}
	if n, err := srv.Do("EXISTS", "{"+key2+"}"); err != nil || n != "1" {
		t.Fatalf("Redis does not hold the new lock: EXISTS = %q, %v", n, err)
	}
	if _, err := b.Release(ctxFor(t, 5*time.Second), key2, "late"); err != nil {
		t.Fatalf("Release: %v", err)
	}

	if n := f.overlaps.Load(); n != 0 {
		t.Fatalf("the key had two holders %d times", n)
	}
	if got, want := f.counter, f.sections.Load(); got != want {
		t.Fatalf("counter = %d after %d critical sections: two holders overlapped", got, want)
	}
	// Both stores issue max(last+1, server time in µs), and a switch waits
	// out the grace, so tokens keep increasing across switches in both
	// directions.
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 1; i < len(f.grants); i++ {
		a, b := f.grants[i-1], f.grants[i]
		if b.token <= a.token {
			t.Fatalf("critical section %d (%s) ran with token %d, not above section %d's %d (%s)", i, b.store, b.token, i-1, a.token, a.store)
		}
	}
	t.Logf("%d critical sections, no overlap, tokens increasing across switches", f.sections.Load())
}

func waitGrant(t *testing.T, f *failover, prefix string, since time.Time, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if at, ok := f.firstGrant(prefix, since); ok {
			return at
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no grant by %s within %v", prefix, within)
	return time.Time{}
}

// tWriter sends log lines to the test log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
