package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// ReadWrite returns the two sides of one read-write lock on a store: a
// backend whose leases are shared with other readers, and one whose
// leases are exclusive. The suite calls it several times to stand for
// several instances and closes backends that implement io.Closer.
type ReadWrite func(t testing.TB) (read, write driver.Backend)

// RunReadWrite runs the cases of a read-write lock: readers hold a key
// together, a writer alone, and a stream of readers does not starve a
// waiting writer.
func RunReadWrite(t *testing.T, newRW ReadWrite) {
	if newRW == nil {
		t.Fatal("locktest: nil ReadWrite")
	}
	cases := []struct {
		name string
		fn   func(*testing.T, ReadWrite)
	}{
		{"ReadersShareWritersExclude", testReadersShare},
		{"ExclusionUnderLoad", testRWExclusion},
		{"WriterNotStarved", testWriterNotStarved},
		{"TokensIncrease", testRWTokens},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newRW) })
	}
}

// rwClients returns clients over both sides of a fresh instance; the read
// side is driver.Shared, so waiting readers of one Client enter together.
func rwClients(t *testing.T, newRW ReadWrite, opts ...turnstile.Option) (read, write *turnstile.Client) {
	t.Helper()
	rb, wb := newRW(t)
	if rb == nil || wb == nil {
		t.Fatal("locktest: ReadWrite returned a nil backend")
	}
	for _, b := range []driver.Backend{rb, wb} {
		if c, ok := b.(interface{ Close() error }); ok {
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	return kindClient(t, rb, opts...), kindClient(t, wb, opts...)
}

// testReadersShare: five readers on five instances hold the key at once;
// a writer cannot enter, and once in, keeps readers and writers out.
func testReadersShare(t *testing.T, newRW ReadWrite) {
	const readers = 5
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	var held []*turnstile.Lease
	var w *turnstile.Client
	for i := range readers {
		r, wc := rwClients(t, newRW)
		w = wc
		l, err := r.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("reader %d while %d readers hold the key: %v", i, i, err)
		}
		held = append(held, l)
	}
	if l, err := w.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("writer while readers hold the key: %v, want ErrNotAcquired", err)
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wl, err := w.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("writer after every reader left: %v", err)
	}
	r2, w2 := rwClients(t, newRW)
	if l, err := r2.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("reader while a writer holds the key: %v, want ErrNotAcquired", err)
	}
	if l, err := w2.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("second writer while a writer holds the key: %v, want ErrNotAcquired", err)
	}
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// w2's refused attempt claimed the key for it: readers wait for it.
	wl2 := acquireWithin(t, w2, k, 10*time.Second)
	if wl2.Token() <= wl.Token() {
		t.Fatalf("second writer's token %d is not greater than the first's %d", wl2.Token(), wl.Token())
	}
	if err := wl2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rl := acquireWithin(t, r2, k, 10*time.Second)
	if rl.Token() <= wl2.Token() {
		t.Fatalf("reader's token %d is not greater than the writer's %d before it", rl.Token(), wl2.Token())
	}
	if err := rl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testRWExclusion: goroutines on four instances take the lock as readers
// or writers at random; in-memory counters check that no reader is inside
// while a writer is, and that writers are alone.
func testRWExclusion(t *testing.T, newRW ReadWrite) {
	const instances, perInstance, rounds = 4, 8, 10
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	var (
		readers, writers atomic.Int32
		maxReaders       atomic.Int32
		violations       atomic.Int32
		mu               sync.Mutex // guards writerTokens; taken inside the write lock only
		writerTokens     []uint64
		workers          []func() error
	)
	for i := range instances {
		rc, wc := rwClients(t, newRW, patient, turnstile.WithTTL(10*time.Second))
		for g := range perInstance {
			rnd := rand.New(rand.NewPCG(uint64(i), uint64(g)))
			workers = append(workers, func() error {
				if rnd.IntN(4) == 0 {
					l, err := wc.Acquire(ctx, k)
					if err != nil {
						return fmt.Errorf("writer: %w", err)
					}
					if writers.Add(1) != 1 || readers.Load() != 0 {
						violations.Add(1)
					}
					mu.Lock()
					writerTokens = append(writerTokens, l.Token())
					mu.Unlock()
					time.Sleep(time.Millisecond)
					if readers.Load() != 0 {
						violations.Add(1)
					}
					writers.Add(-1)
					return l.Release(ctx)
				}
				l, err := rc.Acquire(ctx, k)
				if err != nil {
					return fmt.Errorf("reader: %w", err)
				}
				n := readers.Add(1)
				for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
				}
				if writers.Load() != 0 {
					violations.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
				if writers.Load() != 0 {
					violations.Add(1)
				}
				readers.Add(-1)
				return l.Release(ctx)
			})
		}
	}
	inTurn(t, rounds, workers)
	if n := violations.Load(); n > 0 {
		t.Fatalf("%d times a writer was inside together with a reader or another writer", n)
	}
	checkIncreasing(t, "writer", writerTokens)
	t.Logf("at most %d readers were inside at once", maxReaders.Load())
}

// testWriterNotStarved: eight readers on eight instances take turns so
// that at every moment some reader holds the key; a writer must still get
// in while they keep going, and soon: new readers wait for it, so only
// those that were on their way in when it started waiting (its first
// attempt, which registers its claim, failed) enter before it.
func testWriterNotStarved(t *testing.T, newRW ReadWrite) {
	const streams = 8
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	var (
		inside  atomic.Int32 // readers
		writing atomic.Bool
		bad     atomic.Int32
		rounds  atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		errs    = make(chan error, streams)
	)
	started := make(chan struct{}, streams)
	for i := range streams {
		rc, _ := rwClients(t, newRW, patient)
		wg.Go(func() {
			// Staggered, with holds of random length, so that they overlap:
			// the key is never free of readers while the streams run.
			time.Sleep(time.Duration(i) * 5 * time.Millisecond)
			rnd := rand.New(rand.NewPCG(uint64(i), 7))
			first := true
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := rc.Acquire(ctx, k)
				if err != nil {
					errs <- err
					return
				}
				inside.Add(1)
				if writing.Load() {
					bad.Add(1)
				}
				if first {
					started <- struct{}{}
					first = false
				}
				rounds.Add(1)
				time.Sleep(time.Duration(20+rnd.IntN(40)) * time.Millisecond)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range streams {
		select {
		case <-started:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	// The rounds counted from the moment the writer waits: its first
	// attempt may take long on a loaded machine, and readers enter
	// meanwhile, as they may before a writer has come.
	var waitingFrom atomic.Int64
	waitingFrom.Store(-1)
	waiting := turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
		if e.Type == turnstile.EventWaiting {
			waitingFrom.CompareAndSwap(-1, rounds.Load())
		}
	}))
	_, wc := rwClients(t, newRW, patient, waiting)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	before := rounds.Load()
	l, err := wc.Acquire(wctx, k)
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("writer starved by a stream of readers (%d read rounds meanwhile): %v", rounds.Load()-before, err)
	}
	writing.Store(true)
	if from := waitingFrom.Load(); from >= 0 {
		before = from
	}
	overtook := rounds.Load() - before
	if n := inside.Load(); n != 0 {
		bad.Add(1)
	}
	time.Sleep(20 * time.Millisecond)
	writing.Store(false)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The readers go on after the writer.
	after := rounds.Load()
	deadline := time.Now().Add(10 * time.Second)
	for rounds.Load() < after+streams && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("readers were inside while the writer was (%d times)", n)
	}
	if overtook > 4*streams {
		t.Fatalf("%d readers entered while the writer waited: new readers must wait for a waiting writer", overtook)
	}
	if rounds.Load() < after+streams {
		t.Fatalf("readers did not go on after the writer released")
	}
}

// testRWTokens: readers and writers one after another get increasing
// tokens.
func testRWTokens(t *testing.T, newRW ReadWrite) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	r, w := rwClients(t, newRW)
	checkTokensIncrease(t, ctx, k, 300, func(i int) *turnstile.Client {
		if i%3 == 2 {
			return w
		}
		return r
	})
}
