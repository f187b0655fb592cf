package admission_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/admission"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestRedisBurstThenRefuse: a fresh key admits Burst requests, then
// refuses with a retry-after of at most one emission interval; a refusal
// changes nothing in Redis; after the retry-after one more is admitted.
func TestRedisBurstThenRefuse(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	srv := testserver.StartRedis(t)
	// One admission a second: only a descheduling of a whole second
	// between the burst and the next request could refill the bucket.
	const rate, burst = 1, 5
	a := newRedis(t, srv, admission.Limit{Rate: rate, Burst: burst}, admission.WithoutPreFilter())
	for i := range burst {
		if ok, _, err := a.Admit(ctx, "hot"); !ok || err != nil {
			t.Fatalf("request %d of the burst: %v, %v", i+1, ok, err)
		}
	}
	before := srv.MustDo(t, "GET", a.Key("hot"))
	ok, retry, err := a.Admit(ctx, "hot")
	if ok || err != nil {
		t.Fatalf("past the burst: %v, %v; want refused", ok, err)
	}
	if retry <= 0 || retry > time.Second/rate+time.Microsecond {
		t.Fatalf("retry after %v, want in (0, %v]", retry, time.Second/rate)
	}
	if after := srv.MustDo(t, "GET", a.Key("hot")); after != before {
		t.Fatalf("a refusal changed the state from %s to %s", before, after)
	}
	time.Sleep(retry + time.Millisecond)
	if ok, again, err := a.Admit(ctx, "hot"); !ok || err != nil {
		t.Fatalf("after the retry-after %v: %v, %v (retry %v); want admitted", retry, ok, err, again)
	}
}

// TestRedisSharedByInstances: two instances (clients of their own) share
// one limit per key; keys do not share.
func TestRedisSharedByInstances(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	srv := testserver.StartRedis(t)
	limit := admission.Limit{Rate: 0.1, Burst: 3} // one every 10 s
	a, b := newRedis(t, srv, limit), newRedis(t, srv, limit)
	for i := range 3 {
		if ok, _, err := a.Admit(ctx, "shared"); !ok || err != nil {
			t.Fatalf("instance a, request %d: %v, %v", i+1, ok, err)
		}
	}
	ok, retry, err := b.Admit(ctx, "shared")
	if ok || err != nil {
		t.Fatalf("instance b after a used the burst: %v, %v; want refused", ok, err)
	}
	if retry < 9*time.Second || retry > 10*time.Second {
		t.Fatalf("retry after %v, want about 10s", retry)
	}
	if ok, _, err := b.Admit(ctx, "another"); !ok || err != nil {
		t.Fatalf("another key: %v, %v; want admitted", ok, err)
	}
}

// TestRedisKeyExpiresWhenIdle: the key lives until its TAT, at most
// Burst/Rate, and once gone the key has its full burst again.
func TestRedisKeyExpiresWhenIdle(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	srv := testserver.StartRedis(t)
	const rate, burst = 20, 4 // a full burst is earned back in 200 ms
	a := newRedis(t, srv, admission.Limit{Rate: rate, Burst: burst}, admission.WithPrefix("app:"))
	if got, want := a.Key("idle"), "app:{idle}:admission"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	for range burst {
		if ok, _, err := a.Admit(ctx, "idle"); !ok || err != nil {
			t.Fatalf("burst: %v, %v", ok, err)
		}
	}
	pttl, err := strconv.Atoi(srv.MustDo(t, "PTTL", a.Key("idle")))
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 0 || pttl > burst*1000/rate+1 {
		t.Fatalf("PTTL %d ms, want in (0, %d]", pttl, burst*1000/rate+1)
	}
	for srv.MustDo(t, "EXISTS", a.Key("idle")) != "0" {
		if ctx.Err() != nil {
			t.Fatal("the key of an idle limit did not expire")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b := newRedis(t, srv, admission.Limit{Rate: rate, Burst: burst}, admission.WithPrefix("app:"))
	for i := range burst {
		if ok, _, err := b.Admit(ctx, "idle"); !ok || err != nil {
			t.Fatalf("after expiry, request %d: %v, %v; want a full burst", i+1, ok, err)
		}
	}
	if n := srv.MustDo(t, "DBSIZE"); n != "1" {
		t.Fatalf("%s keys in Redis, want only the limit's", n)
	}
}

// TestRedisKeyNames: the key sits in the lock's hash slot and is escaped
// like the redis backend's keys.
func TestRedisKeyNames(t *testing.T) {
	srv := testserver.StartRedis(t)
	a := newRedis(t, srv, admission.Limit{Rate: 1, Burst: 1})
	for key, want := range map[string]string{
		"lock:inventory:12345":   "{lock:inventory:12345}:admission",
		"stock:{warehouse}:item": "{stock:{warehouse}:item}:admission",
		"}x":                     `{\}x}:admission`,
		`\y`:                     `{\\y}:admission`,
	} {
		if got := a.Key(key); got != want {
			t.Errorf("Key(%q) = %q, want %q", key, got, want)
		}
		if ok, _, err := a.Admit(context.Background(), key); !ok || err != nil {
			t.Errorf("Admit(%q): %v, %v", key, ok, err)
		}
		if srv.MustDo(t, "EXISTS", want) != "1" {
			t.Errorf("no key %q after admitting %q", want, key)
		}
	}
}

// TestPreFilterSavesRoundTrips: requests this process alone offers beyond
// the limit are refused without asking Redis; without the pre-filter
// each one is a round trip.
func TestPreFilterSavesRoundTrips(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	srv := testserver.StartRedis(t)
	limit := admission.Limit{Rate: 0.1, Burst: 3}
	for _, tc := range []struct {
		name  string
		opts  []admission.Option
		trips int
	}{
		{"pre-filter", nil, 3},
		{"without pre-filter", []admission.Option{admission.WithoutPreFilter()}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newRedis(t, srv, limit, tc.opts...)
			key := "trips:" + tc.name
			// Load the script first, so that every counted call is one run.
			if _, _, err := a.Admit(ctx, "warm-up:"+tc.name); err != nil {
				t.Fatal(err)
			}
			srv.MustDo(t, "CONFIG", "RESETSTAT")
			admitted := 0
			for range 50 {
				ok, retry, err := a.Admit(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					admitted++
				} else if retry <= 0 || retry > 10*time.Second {
					t.Fatalf("retry after %v, want in (0, 10s]", retry)
				}
			}
			if admitted != 3 {
				t.Errorf("admitted %d of 50, want the burst of 3", admitted)
			}
			if n := scriptRuns(t, srv); n != tc.trips {
				t.Errorf("%d scripts ran on Redis, want %d", n, tc.trips)
			}
		})
	}
}

// TestRedisUnreachable: when Redis cannot be asked, Admit says so with an
// error, never with a verdict; a cancelled context's error matches it.
func TestRedisUnreachable(t *testing.T) {
	srv := testserver.StartRedis(t)
	a := newRedis(t, srv, admission.Limit{Rate: 1000, Burst: 10})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, _, err := a.Admit(ctx, "k"); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, %v; want context.Canceled", ok, err)
	}
	srv.Kill()
	ctx = ctxFor(t, 2*time.Second)
	if ok, _, err := a.Admit(ctx, "k"); ok || err == nil {
		t.Fatalf("server down: %v, %v; want an error", ok, err)
	}
}

// TestRedisCluster: on a Redis Cluster each key's limit lives on the node
// of its slot, and every key is limited on its own.
func TestRedisCluster(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	cl := testserver.StartRedisCluster(t)
	// One seed address: with several, rueidis keeps a surplus connection
	// to close five seconds later, which the leak check would report.
	seed := cl.Addrs()[0]
	a, err := admission.NewRedis(newClient(t, seed), admission.Limit{Rate: 0.1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		key := fmt.Sprint("item:", i)
		if ok, _, err := a.Admit(ctx, key); !ok || err != nil {
			t.Fatalf("%s, first: %v, %v", key, ok, err)
		}
	}
	// Another instance sees the same limits.
	b, err := admission.NewRedis(newClient(t, seed), admission.Limit{Rate: 0.1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		key := fmt.Sprint("item:", i)
		if ok, retry, err := b.Admit(ctx, key); ok || err != nil || retry <= 0 {
			t.Fatalf("%s, second: %v, %v, %v; want refused", key, ok, retry, err)
		}
	}
}

// TestAdmitN: a batch takes as many as the limit allows now, and no more.
func TestAdmitN(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	srv := testserver.StartRedis(t)
	limit := admission.Limit{Rate: 10, Burst: 5}
	local, err := admission.NewLocal(limit)
	if err != nil {
		t.Fatal(err)
	}
	// The burst refills one request per interval (100 ms). The server's
	// clock is this machine's, so after the burst no check may admit
	// more than the intervals since just before the burst was taken; on
	// a busy machine more of them may have passed than the test slept.
	const interval = 100 * time.Millisecond
	for name, a := range map[string]turnstile.BatchAdmission{"redis": newRedis(t, srv, limit), "local": local} {
		start := time.Now()
		n, retry, err := a.AdmitN(ctx, "batch", 8)
		if err != nil || n != 5 || retry != 0 {
			t.Fatalf("%s: first batch of 8 with a burst of 5: %d, %v, %v", name, n, retry, err)
		}
		n, retry, err = a.AdmitN(ctx, "batch", 3)
		if err != nil || n > int(time.Since(start)/interval) || (n == 0 && (retry <= 0 || retry > interval)) {
			t.Fatalf("%s: batch after the burst, %v after it: %d, %v, %v; want 0 and a retry within 100ms", name, time.Since(start), n, retry, err)
		}
		// Once a retry hint has passed, a request is admitted; the hint of
		// the local pre-filter may come early by as long as this goroutine
		// waited between reading the clock and the server's, and then a
		// new, shorter hint is given.
		for n == 0 {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: nothing admitted 5s after a burst of 5 at 10/s", name)
			}
			time.Sleep(retry + 5*time.Millisecond)
			if n, retry, err = a.AdmitN(ctx, "batch", 3); err != nil || (n == 0 && (retry <= 0 || retry > interval)) {
				t.Fatalf("%s: batch once the retry hint passed: %d, %v, %v", name, n, retry, err)
			}
		}
		if limit := int(time.Since(start) / interval); n < 1 || n > limit {
			t.Fatalf("%s: batch of 3 %v after the burst admitted %d, want 1 to %d", name, time.Since(start), n, limit)
		}
		for _, bad := range []int{0, -1, admission.MaxBatch + 1} {
			if _, _, err := a.AdmitN(ctx, "batch", bad); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("%s: batch of %d: %v", name, bad, err)
			}
		}
	}
}
