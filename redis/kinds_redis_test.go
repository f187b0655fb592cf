package redis_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestKindKeys: each kind keeps its state where the documentation says,
// and all of them draw tokens from the name's one fence key, so tokens
// keep increasing whichever kind locks the name next.
func TestKindKeys(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	kinds := kindBackends(t, b)
	const k = "kinds:keys"
	lk := lockKey(k)
	var last uint64
	take := func(be driver.Backend, owner string) uint64 {
		t.Helper()
		tok, ok, err := be.Acquire(ctx, k, owner, time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire by %s: ok=%v err=%v", owner, ok, err)
		}
		if tok <= last {
			t.Fatalf("token %d is not greater than the previous %d", tok, last)
		}
		last = tok
		if got := srv.MustDo(t, "GET", fenceKey(k)); got != strconv.FormatUint(tok, 10) {
			t.Fatalf("fence key holds %q, want the last token %d", got, tok)
		}
		return tok
	}
	free := func(be driver.Backend, owner string) {
		t.Helper()
		if ok, err := be.Release(ctx, k, owner); !ok || err != nil {
			t.Fatalf("release by %s: ok=%v err=%v", owner, ok, err)
		}
	}

	take(b, "plain")
	free(b, "plain")

	tok := take(kinds["reentrant"], "re")
	if n, _, _ := kinds["reentrant"].Acquire(ctx, k, "re", time.Minute); n != tok {
		t.Fatalf("re-entry token %d, want %d", n, tok)
	}
	if got := srv.MustDo(t, "HGET", lk+":reentrant", "re"); got != "2" {
		t.Fatalf("reentrant count = %q, want 2", got)
	}
	if got := srv.MustDo(t, "HGET", lk+":reentrant", ""); got != strconv.FormatUint(tok, 10) {
		t.Fatalf("reentrant token field = %q, want %d", got, tok)
	}
	free(kinds["reentrant"], "re")
	free(kinds["reentrant"], "re")
	if got := srv.MustDo(t, "EXISTS", lk+":reentrant"); got != "0" {
		t.Fatalf("reentrant hash still exists after the last release")
	}

	take(kinds["read"], "r1")
	take(kinds["read"], "r2")
	if got := srv.MustDo(t, "ZCARD", lk+":readers"); got != "2" {
		t.Fatalf("%s readers in the set, want 2", got)
	}
	free(kinds["read"], "r1")
	free(kinds["read"], "r2")
	take(kinds["write"], "w")
	if got := srv.MustDo(t, "GET", lk+":writer"); got != "w" {
		t.Fatalf("writer key holds %q, want the owner", got)
	}
	free(kinds["write"], "w")

	take(kinds["semaphore"], "s1")
	take(kinds["semaphore"], "s2")
	if _, ok, err := kinds["semaphore"].Acquire(ctx, k, "s3", time.Minute); ok || err != nil {
		t.Fatalf("third permit of two = %v, %v", ok, err)
	}
	if got := srv.MustDo(t, "ZCARD", lk+":semaphore"); got != "2" {
		t.Fatalf("%s permits in the set, want 2", got)
	}
	free(kinds["semaphore"], "s1")
	free(kinds["semaphore"], "s2")

	take(kinds["fair"], "f")
	if got := srv.MustDo(t, "GET", lk); got != "f" {
		t.Fatalf("fair lock key holds %q, want the owner: it is the plain lock", got)
	}
	free(b, "f") // the plain release frees a fair lock
	if got := srv.MustDo(t, "EXISTS", lk); got != "0" {
		t.Fatal("plain release left the fair lock")
	}
}

// TestKindNotices: the release that frees a kind's lock (or a permit)
// is published on the name's release channel, where Client waiters
// listen.
func TestKindNotices(t *testing.T) {
	srv, ctx := startRedis(t)
	for name, be := range kindBackends(t, dial(t, srv)) {
		t.Run(name, func(t *testing.T) {
			k := "kinds:notice:" + name
			ch, stop, err := be.(driver.Notifier).Released(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if _, ok, err := be.Acquire(ctx, k, "o", time.Minute); !ok || err != nil {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			if ok, err := be.Release(ctx, k, "o"); !ok || err != nil {
				t.Fatalf("release: %v %v", ok, err)
			}
			awaitNotice(t, ch, "no release notice")
		})
	}
}

// TestFairAndPlainExclude: the fair lock is the plain lock, so each kind
// of caller keeps the other out.
func TestFairAndPlainExclude(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	f := fairOf(t, b)
	const k = "kinds:fair-plain"
	if _, ok, err := b.Acquire(ctx, k, "plain", time.Minute); !ok || err != nil {
		t.Fatalf("plain acquire: %v %v", ok, err)
	}
	if _, ok, err := f.Acquire(ctx, k, "fair", time.Minute); ok || err != nil {
		t.Fatalf("fair acquire of a plain-held lock = %v, %v; want false, nil", ok, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := f.AcquireWait(wctx, k, "fair", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fair wait for a plain-held lock = %v, want context.DeadlineExceeded", err)
	}
	if n, err := f.Position(ctx, k, "fair"); n != 0 || err != nil {
		t.Fatalf("a waiter that gave up still has place %d (%v)", n, err)
	}
	if ok, err := b.Release(ctx, k, "plain"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := f.AcquireWait(ctx, k, "fair", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Acquire(ctx, k, "plain", time.Minute); ok || err != nil {
		t.Fatalf("plain acquire of a fair-held lock = %v, %v; want false, nil", ok, err)
	}
}

// TestFairPositions: waiters learn their place when they join and as it
// shrinks; Position tells it to anyone who asks.
func TestFairPositions(t *testing.T) {
	srv, ctx := startRedis(t)
	f := fairOf(t, dial(t, srv))
	const k, waiters = "kinds:positions", 4
	if _, ok, err := f.Acquire(ctx, k, "holder", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var (
		mu    sync.Mutex
		seen  = make([][]int, waiters)
		wg    sync.WaitGroup
		errs  = make(chan error, waiters)
		owner = func(i int) string { return "waiter-" + strconv.Itoa(i) }
	)
	for i := range waiters {
		wctx := driver.WithPositionFunc(ctx, func(p int) {
			mu.Lock()
			seen[i] = append(seen[i], p)
			mu.Unlock()
		})
		wg.Go(func() {
			if _, err := f.AcquireWait(wctx, k, owner(i), time.Minute); err != nil {
				errs <- err
				return
			}
			if ok, err := f.Release(ctx, k, owner(i)); !ok || err != nil {
				errs <- errors.Join(errors.New("release refused"), err)
			}
		})
		for {
			n, err := f.Position(ctx, k, owner(i))
			if err != nil {
				t.Fatal(err)
			}
			if n == i+1 {
				break
			}
			if n != 0 {
				t.Fatalf("waiter %d is at place %d, want %d", i, n, i+1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if ok, err := f.Release(ctx, "kinds:positions", "holder"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("places told: %v", seen)
	for i, ps := range seen {
		if len(ps) == 0 || ps[0] != i+1 {
			t.Fatalf("waiter %d was told %v, want its place %d first", i, ps, i+1)
		}
		if !slices.IsSortedFunc(ps, func(a, b int) int { return b - a }) || slices.Contains(ps, 0) {
			t.Fatalf("waiter %d was told %v: places must only shrink, down to 1", i, ps)
		}
	}
}

// TestFairAbandonedWaiterAgesOut: a waiter that stops beating (its
// process crashed) loses its place after the waiter timeout, and the
// waiter behind it takes the lock.
func TestFairAbandonedWaiterAgesOut(t *testing.T) {
	srv, ctx := startRedis(t)
	const timeout = 300 * time.Millisecond
	f := fairOf(t, dial(t, srv), turnstile.WithWaiterTimeout(timeout))
	const k = "kinds:abandoned"
	q := lockKey(k) + ":queue"
	// A waiter of a crashed process: first in line, last beat just now.
	srv.MustDo(t, "ZADD", q, "1", "crashed")
	srv.MustDo(t, "ZADD", q+":alive", strconv.FormatInt(time.Now().Add(timeout).UnixMilli(), 10), "crashed")
	srv.MustDo(t, "SET", q+":seq", "1")
	if _, ok, err := f.Acquire(ctx, k, "eager", time.Minute); ok || err != nil {
		t.Fatalf("Acquire with a waiter in line = %v, %v; want false, nil", ok, err)
	}
	tok, err := f.AcquireWait(ctx, k, "alive", time.Minute)
	if err != nil {
		t.Fatalf("waiter behind a crashed one: %v", err)
	}
	if tok == 0 {
		t.Fatal("token 0")
	}
	if got := srv.MustDo(t, "EXISTS", q, q+":alive", q+":seq"); got != "0" {
		t.Fatalf("%s queue keys left after the last waiter took the lock", got)
	}
}

// TestKindsGoRedis runs the kinds' cases over a go-redis client, whose
// adapter runs the same scripts.
func TestKindsGoRedis(t *testing.T) {
	srv := testserver.StartRedis(t)
	runKinds(t, func(t testing.TB) *redis.Backend { return goRedisBackend(t, srv) }, queueLength(srv), 2, "")
}

// TestReentrantClient: through a Client, nested acquisitions by one
// owner need as many releases, and a waiter of another Client takes the
// lock once the last one is made (woken by its notice).
func TestReentrantClient(t *testing.T) {
	srv, ctx := startRedis(t)
	c := newClient(t, reentrantOf(t, dial(t, srv)), turnstile.WithOwner("job-42"))
	other := newClient(t, reentrantOf(t, dial(t, srv)))
	const k = "kinds:reentrant-client"
	outer, err := c.Acquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Acquire(ctx, k)
	if err != nil {
		t.Fatalf("nested Acquire by the holder: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := other.Acquire(ctx, k, turnstile.WithBackoff(turnstile.Exponential{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond, MaxRetries: -1}))
		if err == nil {
			if l.Token() <= outer.Token() {
				err = errors.New("token of the next holder is not greater")
			}
			err = errors.Join(err, l.Release(ctx))
		}
		got <- err
	}()
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if outer.Context().Err() != nil {
		t.Fatal("the outer lease ended with the inner release")
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter of another Client: %v", err)
	}
}

// TestReentrantShortInnerLease: a nested acquisition with a short TTL,
// and its renewal, never cut short the lock the outer one holds longer.
func TestReentrantShortInnerLease(t *testing.T) {
	srv, ctx := startRedis(t)
	r := reentrantOf(t, dial(t, srv))
	const k = "kinds:reentrant-ttl"
	if _, ok, err := r.Acquire(ctx, k, "o", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, err := r.Acquire(ctx, k, "o", turnstile.MinTTL); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := r.Extend(ctx, k, "o", turnstile.MinTTL); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := r.Release(ctx, k, "o"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ttl := atoi(t, srv.MustDo(t, "PTTL", lockKey(k)+":reentrant")); ttl < int((50*time.Second)/time.Millisecond) {
		t.Fatalf("lock TTL %d ms after a short nested lease, want the outer minute", ttl)
	}
}

// TestFairExpiredHolder: a holder that crashed sends no release notice;
// the waiters poll, and take the lock in order once it expires.
func TestFairExpiredHolder(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	f := fairOf(t, b, turnstile.WithPollInterval(20*time.Millisecond))
	const k = "kinds:fair-expired"
	crashed, ok, err := b.Acquire(ctx, k, "crashed", 300*time.Millisecond)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	first := make(chan uint64, 1)
	go func() {
		tok, err := f.AcquireWait(ctx, k, "first", 300*time.Millisecond) // crashes too
		if err != nil {
			t.Error(err)
		}
		first <- tok
	}()
	for n := 0; n != 1; time.Sleep(time.Millisecond) {
		if n, err = f.Position(ctx, k, "first"); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := f.AcquireWait(ctx, k, "second", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t1 := <-first
	if !(crashed < t1 && t1 < tok) {
		t.Fatalf("tokens %d (crashed), %d (first), %d (second): want the queue's order", crashed, t1, tok)
	}
}
