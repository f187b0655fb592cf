package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestTokensMonotonicUnderFaults: several clients take a few keys more
// than 10,000 times, and until servers were killed and restarted empty
// at least 5 times, one at a time, keeping a majority up (restarted
// servers sit out their quarantine). The tokens, recorded inside the critical section, never
// decrease, and no two critical sections of a key overlap.
func TestTokensMonotonicUnderFaults(t *testing.T) {
	const (
		want            = 10_000 // acquisitions, unless the work budget ends first
		atLeastRestarts = 5
		atLeast         = 2_000 // acquisitions a slow, busy machine still makes
		budget          = 90 * time.Second
		ttl             = time.Second // also the restart quarantine
		clients         = 3
		perClient       = 2
		keys            = 3
		maxOut          = 1 // servers restarting or in quarantine at once, of 5
		chaosEvery      = 200 * time.Millisecond
	)
	srvs := startNodes(t, 5)
	ctx := ctxFor(t, 2*time.Minute)
	cs := make([]*turnstile.Client, clients)
	for i := range cs {
		cs[i] = redlockClient(t, srvs, ttl)
	}
	waitFor(t, ttl+5*time.Second, "the fresh servers' quarantine ends", func() bool {
		l, err := cs[0].TryAcquire(ctx, "warm-up")
		if err == nil {
			_ = l.Release(ctx)
		}
		return err == nil
	})

	type keyLog struct {
		mu     sync.Mutex
		last   uint64
		n      int
		inside atomic.Int32
	}
	var (
		logs       [keys]keyLog
		done       atomic.Int64
		restarts   atomic.Int64
		failures   atomic.Int64
		violations = make(chan string, 16)
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	report := func(s string) {
		select {
		case violations <- s:
		default:
		}
	}
	work, endWork := context.WithTimeout(ctx, budget)
	defer endWork()
	for _, c := range cs {
		for range perClient {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
				for (done.Load() < want || restarts.Load() < atLeastRestarts) && work.Err() == nil {
					k := r.IntN(keys)
					key := "monotonic:" + strconv.Itoa(k)
					l, err := c.TryAcquire(ctx, key) // a new owner per attempt
					if err != nil {
						failures.Add(1)
						time.Sleep(time.Duration(r.Int64N(int64(4 * time.Millisecond))))
						continue
					}
					lg := &logs[k]
					if lg.inside.Add(1) != 1 {
						report("two holders of " + key + " at once")
					}
					lg.mu.Lock()
					if tok := l.Token(); tok <= lg.last {
						report(key + ": token " + strconv.FormatUint(tok, 10) + " after " + strconv.FormatUint(lg.last, 10))
					} else {
						lg.last = tok
					}
					lg.n++
					lg.mu.Unlock()
					lg.inside.Add(-1)
					done.Add(1)
					_ = l.Release(ctx) // a restart may have taken it already
				}
			})
		}
	}

	chaos := make(chan struct{})
	go func() {
		defer close(chaos)
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		out := make([]time.Time, len(srvs)) // when each server rejoins
		for {
			select {
			case <-stop:
				return
			case <-time.After(chaosEvery + time.Duration(r.Int64N(int64(chaosEvery)))):
			}
			now, busy := time.Now(), 0
			for _, back := range out {
				if now.Before(back) {
					busy++
				}
			}
			i := r.IntN(len(srvs))
			if busy >= maxOut || now.Before(out[i]) {
				continue
			}
			srvs[i].Restart() // SIGKILL, then an empty server on the same port
			out[i] = time.Now().Add(ttl + 200*time.Millisecond)
			restarts.Add(1)
		}
	}()
	wg.Wait()
	close(stop)
	<-chaos
	close(violations)
	for v := range violations {
		t.Error(v)
	}
	if n := done.Load(); n < atLeast {
		t.Fatalf("%d acquisitions in %v, want at least %d", n, budget, atLeast)
	}
	if n := restarts.Load(); n < atLeastRestarts {
		t.Fatalf("only %d restarts happened during the run", n)
	}
	t.Logf("%d acquisitions on %d keys, %d failed attempts, %d server restarts", done.Load(), keys, failures.Load(), restarts.Load())
}

// TestWriteBackKeepsTokensIncreasing: nodes issue tokens from their own
// counters, far apart. A holder granted by nodes 1 and 2 gets node 1's
// large token; the next holder, granted by nodes 2 and 3 while node 1 is
// down, must get a larger one. The write-back to node 2 makes it so;
// without it (WithoutFencing) the token goes backwards.
func TestWriteBackKeepsTokensIncreasing(t *testing.T) {
	for _, fencing := range []bool{true, false} {
		t.Run("fencing="+strconv.FormatBool(fencing), func(t *testing.T) {
			ctx := ctxFor(t, 10*time.Second)
			opts := []redlock.Option{redlock.WithWaitAll()}
			if !fencing {
				opts = append(opts, redlock.WithoutFencing())
			}
			b, nodes := cluster(t, 3, opts...)
			for i := range 1000 { // node 1's counter runs far ahead
				if _, ok, err := nodes[0].mem.Acquire(ctx, "other:"+strconv.Itoa(i), "x", time.Minute); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			nodes[2].set(func(f *flaky) { f.down = true })
			t1, ok, err := b.Acquire(ctx, "k", "a", time.Minute)
			if !ok || err != nil {
				t.Fatalf("first holder: ok=%v err=%v", ok, err)
			}
			if ok, err := b.Release(ctx, "k", "a"); !ok || err != nil {
				t.Fatalf("release: ok=%v err=%v", ok, err)
			}
			nodes[2].set(func(f *flaky) { f.down = false })
			nodes[0].set(func(f *flaky) { f.down = true })
			t2, ok, err := b.Acquire(ctx, "k", "b", time.Minute)
			if !ok || err != nil {
				t.Fatalf("second holder: ok=%v err=%v", ok, err)
			}
			if fencing && t2 <= t1 {
				t.Fatalf("with write-back the second holder's token %d is not greater than the first's %d", t2, t1)
			}
			if !fencing && t2 >= t1 {
				t.Fatalf("without write-back expected the token to go backwards here (%d then %d); the test no longer shows why write-back is needed", t1, t2)
			}
		})
	}
}

// TestTokensMonotonicMemoryChaos is the same property on in-process nodes
// with independent counters — the case where only the write-back keeps
// tokens in order — under random outages of a minority of nodes, quickly.
// A node that was down during a release keeps that lock until its TTL, as
// a partitioned server would, so attempts may fail for a while.
func TestTokensMonotonicMemoryChaos(t *testing.T) {
	const ttl = turnstile.MinTTL
	ctx := ctxFor(t, time.Minute)
	b, nodes := cluster(t, 5)
	for i, n := range nodes { // counters far apart, so that any decrease shows
		for j := range i * 300 {
			_, _, _ = n.mem.Acquire(ctx, "warm:"+strconv.Itoa(j), "x", time.Minute)
		}
	}
	c, err := turnstile.New(b, turnstile.WithTTL(ttl), turnstile.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var last uint64
	for i := range 3000 {
		if i%10 == 0 { // another minority of nodes is down every 10 acquisitions
			down := map[int]bool{}
			for len(down) < r.IntN(3) {
				down[r.IntN(len(nodes))] = true
			}
			for j, n := range nodes {
				n.set(func(f *flaky) { f.down = down[j] })
			}
		}
		var l *turnstile.Lease
		for tries := 0; l == nil; tries++ {
			if l, err = c.TryAcquire(ctx, "k"); err != nil {
				// Stale locks on nodes that were down during a release, and
				// short node timeouts on a busy machine, make attempts fail.
				if !errors.Is(err, turnstile.ErrNotAcquired) && !errors.Is(err, redlock.ErrNoQuorum) || tries > 1000 {
					t.Fatalf("acquisition %d: %v", i, err)
				}
				time.Sleep(time.Millisecond)
			}
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		_ = l.Release(ctx) // may miss the nodes that are down
	}
}
