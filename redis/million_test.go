//go:build !race

// The race detector slows the client about fivefold, which would stretch
// this test past a minute; scripts/test.sh runs it in its non-race pass.
// Without -race it takes about 20 s on two CPUs, most of it Redis running
// two million Lua scripts.

package redis_test

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestMillionKeys locks and releases 1,000,000 distinct keys, the scale
// turnstile is built for: every token is larger than one issued before the
// run and smaller than one issued FreshMargin after it (tokens of fresh
// keys follow the client's reading of the server clock, which errs high
// by up to that: a sample taken again may read lower than the last one
// extrapolated), every key Redis keeps has a
// TTL, and once the grace period has passed the keyspace and memory are
// back where they started — fencing costs no memory per key ever used.
func TestMillionKeys(t *testing.T) {
	const (
		keys    = 1_000_000
		workers = 1024
		grace   = 200 * time.Millisecond
		ttl     = 10 * time.Second
	)
	srv := testserver.StartRedis(t)
	b := dial(t, srv, redis.WithFenceGrace(grace))
	ctx := ctxFor(t, 5*time.Minute)
	baseline := usedMemory(t, srv)

	before := acquireRelease(t, b, "probe", "p0")
	var (
		next    atomic.Int64
		maxTok  atomic.Uint64
		wg      sync.WaitGroup
		errs    = make(chan error, workers)
		started = time.Now()
	)
	for range workers {
		wg.Go(func() {
			var high uint64
			for {
				i := next.Add(1) - 1
				if i >= keys {
					break
				}
				k := "m:" + strconv.FormatInt(i, 36)
				tok, ok, err := b.Acquire(ctx, k, "o", ttl)
				if err != nil || !ok {
					errs <- fmt.Errorf("acquire %s: ok=%v err=%v", k, ok, err)
					return
				}
				if tok <= before {
					errs <- fmt.Errorf("token %d of %s not greater than %d, issued before it", tok, k, before)
					return
				}
				high = max(high, tok)
				if ok, err := b.Release(ctx, k, "o"); !ok || err != nil {
					errs <- fmt.Errorf("release %s: ok=%v err=%v", k, ok, err)
					return
				}
			}
			for cur := maxTok.Load(); high > cur && !maxTok.CompareAndSwap(cur, high); cur = maxTok.Load() {
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d keys locked and released in %v", keys, time.Since(started))

	n, expires := keyspace(t, srv)
	if n != expires {
		t.Fatalf("keyspace holds %d keys but only %d have a TTL: memory would grow with every key ever locked", n, expires)
	}
	time.Sleep(redis.FreshMargin)
	if after := acquireRelease(t, b, "probe", "p1"); after <= maxTok.Load() {
		t.Fatalf("token %d issued after the run is not greater than the run's largest %d", after, maxTok.Load())
	}

	// Redis expires keys actively in the background; give it time.
	time.Sleep(grace)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _ = keyspace(t, srv)
		if n <= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left %v after the grace period", n, 30*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var used int64
	for {
		used = usedMemory(t, srv)
		if used < baseline+8<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("used_memory %d, baseline %d: not back after the keys expired", used, baseline)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("used_memory: baseline %d, after %d", baseline, used)
}

var keyspaceRe = regexp.MustCompile(`db0:keys=(\d+),expires=(\d+)`)

// keyspace returns INFO keyspace's key and TTL counts of database 0.
func keyspace(t *testing.T, srv *testserver.Redis) (keys, expires int) {
	t.Helper()
	m := keyspaceRe.FindStringSubmatch(srv.MustDo(t, "INFO", "keyspace"))
	if m == nil {
		return 0, 0 // an empty database is not listed
	}
	keys, _ = strconv.Atoi(m[1])
	expires, _ = strconv.Atoi(m[2])
	return keys, expires
}

var usedMemoryRe = regexp.MustCompile(`used_memory:(\d+)`)

func usedMemory(t *testing.T, srv *testserver.Redis) int64 {
	t.Helper()
	m := usedMemoryRe.FindStringSubmatch(srv.MustDo(t, "INFO", "memory"))
	if m == nil {
		t.Fatal("INFO memory has no used_memory")
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
