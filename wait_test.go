package turnstile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// notifying is the memory store with release notices, delivered from
// another goroutine as a network store would. It counts round trips.
type notifying struct {
	*memory.Backend
	acquires  atomic.Int64
	granted   atomic.Int64
	releases  atomic.Int64
	subscribe atomic.Int64
	drop      atomic.Bool // lose every notice

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newNotifying() *notifying {
	return &notifying{Backend: memory.New(), subs: map[string]map[chan struct{}]struct{}{}}
}

func (n *notifying) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	n.acquires.Add(1)
	tok, ok, err := n.Backend.Acquire(ctx, key, owner, ttl)
	if ok {
		n.granted.Add(1)
	}
	return tok, ok, err
}

func (n *notifying) Release(ctx context.Context, key, owner string) (bool, error) {
	n.releases.Add(1)
	ok, err := n.Backend.Release(ctx, key, owner)
	if ok && !n.drop.Load() {
		n.mu.Lock()
		var chs []chan struct{}
		for ch := range n.subs[key] {
			chs = append(chs, ch)
		}
		n.mu.Unlock()
		go func() {
			for _, ch := range chs {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}()
	}
	return ok, err
}

func (n *notifying) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	n.subscribe.Add(1)
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[key] == nil {
		n.subs[key] = map[chan struct{}]struct{}{}
	}
	n.subs[key][ch] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			n.mu.Lock()
			delete(n.subs[key], ch)
			n.mu.Unlock()
		})
	}
	return ch, stop, nil
}

func (n *notifying) subscribers() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	total := 0
	for _, m := range n.subs {
		total += len(m)
	}
	return total
}

// patient waits as long as the context allows.
var patient = turnstile.WithBackoff(turnstile.Exponential{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond, MaxRetries: -1})

// herd runs waiters per client on one key, each holding it for hold, and
// returns how many store acquisition attempts each success cost.
func herd(t *testing.T, n *notifying, clients []*turnstile.Client, waiters int, hold time.Duration, opts ...turnstile.Option) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, grantedBefore := n.acquires.Load(), n.granted.Load()
	var wg sync.WaitGroup
	var inside atomic.Int32
	errs := make(chan error, waiters*len(clients))
	for _, c := range clients {
		for range waiters {
			wg.Go(func() {
				l, err := c.Acquire(ctx, "herd", append([]turnstile.Option{patient}, opts...)...)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- errors.New("two holders at once")
				}
				time.Sleep(hold)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	granted := n.granted.Load() - grantedBefore
	if granted != int64(waiters*len(clients)) {
		t.Fatalf("%d grants for %d waiters", granted, waiters*len(clients))
	}
	return float64(n.acquires.Load()-before) / float64(granted)
}

func newClients(t *testing.T, n *notifying, count int) []*turnstile.Client {
	var cs []*turnstile.Client
	for range count {
		cs = append(cs, newClient(t, n))
	}
	return cs
}

// TestHerdCoalescedCostsFewAttempts: two "processes" (Clients) with 200
// waiters each on one key. With notices and local lines a release costs
// about one attempt per process; every goroutine on its own costs more.
func TestHerdCoalescedCostsFewAttempts(t *testing.T) {
	n := newNotifying()
	coalesced := herd(t, n, newClients(t, n, 2), 200, 200*time.Microsecond)
	alone := herd(t, n, newClients(t, n, 2), 200, 200*time.Microsecond, turnstile.WithoutCoalescing())
	t.Logf("store attempts per acquisition: coalesced %.2f, every waiter alone %.2f", coalesced, alone)
	if coalesced > 2.5 {
		t.Errorf("coalesced waiting made %.2f attempts per acquisition, want at most 2.5 (two processes)", coalesced)
	}
	if alone <= coalesced {
		t.Errorf("waiters on their own made %.2f attempts per acquisition, not more than coalesced ones (%.2f)", alone, coalesced)
	}
	n.unsubscribed(t)
}

// TestHerdNeverStalls: a herd repeated 200 times always finishes; a
// stalled waiter would sit on a free lock until the context ends.
func TestHerdNeverStalls(t *testing.T) {
	n := newNotifying()
	cs := newClients(t, n, 2)
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var wg sync.WaitGroup
		var failed atomic.Int32
		for w := range 10 {
			wg.Go(func() {
				l, err := cs[w%2].Acquire(ctx, "stall", patient)
				if err != nil {
					failed.Add(1)
					return
				}
				_ = l.Release(ctx)
			})
		}
		wg.Wait()
		cancel()
		if failed.Load() > 0 {
			t.Fatalf("round %d: %d waiters never got the lock", i, failed.Load())
		}
	}
}

// TestLostNoticeSafetyNet: when every notice is lost the Backoff's timer
// still finds the released lock, coalesced or not.
func TestLostNoticeSafetyNet(t *testing.T) {
	for _, opts := range [][]turnstile.Option{nil, {turnstile.WithoutCoalescing()}} {
		n := newNotifying()
		n.drop.Store(true)
		c := newClient(t, n)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		holder, err := c.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := c.Acquire(ctx, "k", append([]turnstile.Option{patient}, opts...)...)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		for n.acquires.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter after a lost notice: %v", err)
		}
		cancel()
	}
}

// TestLocalLineIsFirstComeFirstServed: waiters of one Client get the
// lock in the order they started waiting.
func TestLocalLineIsFirstComeFirstServed(t *testing.T) {
	n := newNotifying()
	rec := &recorder{}
	c := newClient(t, n, turnstile.WithObserver(rec))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := c.TryAcquire(ctx, "fifo")
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 20
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			l, err := c.Acquire(ctx, "fifo", patient)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Release(ctx)
		})
		// The next one starts only once this one is in line.
		for countType(rec, "fifo", "WAITING") < i+1 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	_ = holder.Release(ctx)
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("acquisition order %v, want arrival order 0..%d", order, waiters-1)
		}
	}
}

func countType(r *recorder, key, typ string) int {
	n := 0
	for _, s := range r.types(key) {
		if s == typ {
			n++
		}
	}
	return n
}

// TestQueuedWaitersGiveUpAndCancel: waiters behind a lock that is never
// released end with ErrNotAcquired after their Backoff's total wait, or
// with the context's error; the line they leave still works.
func TestQueuedWaitersGiveUpAndCancel(t *testing.T) {
	n := newNotifying()
	c := newClient(t, n)
	ctx := context.Background()
	holder, err := c.TryAcquire(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	short := turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 2 * time.Millisecond, MaxRetries: 5})
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if _, err := c.Acquire(ctx, "stuck", short); !errors.Is(err, turnstile.ErrNotAcquired) {
				t.Errorf("waiter behind a stuck lock: %v, want ErrNotAcquired", err)
			}
		})
	}
	cctx, cancel := context.WithCancel(ctx)
	for range 5 {
		wg.Go(func() {
			if _, err := c.Acquire(cctx, "stuck", patient); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled waiter: %v, want context.Canceled", err)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	wg.Wait()
	_ = holder.Release(ctx)
	l, err := c.Acquire(ctx, "stuck", patient)
	if err != nil {
		t.Fatalf("after the line emptied: %v", err)
	}
	_ = l.Release(ctx)
	n.unsubscribed(t)
}

// unsubscribed fails the test unless every subscription ends soon: a
// line that empties unsubscribes in the background, its last waiter not
// waiting for the round trip.
func (n *notifying) unsubscribed(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); n.subscribers() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions left 10 s after the waiting ended", n.subscribers())
		}
	}
}

// TestWithoutNotificationsPolls: the option keeps Acquire off the
// store's notices.
func TestWithoutNotificationsPolls(t *testing.T) {
	n := newNotifying()
	c := newClient(t, n, turnstile.WithoutNotifications())
	ctx := context.Background()
	holder, err := c.TryAcquire(ctx, "poll")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(20 * time.Millisecond); _ = holder.Release(ctx) }()
	l, err := c.Acquire(ctx, "poll", patient)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if s := n.subscribe.Load(); s != 0 {
		t.Fatalf("%d subscriptions with notifications off", s)
	}
}

func ExampleWithoutCoalescing() {
	c, _ := turnstile.New(memory.New(), turnstile.WithoutCoalescing(), turnstile.WithoutNotifications())
	defer c.Close()
	l, err := c.Acquire(context.Background(), "lock:report")
	fmt.Println(err, l.Token() > 0)
	_ = l.Release(context.Background())
	// Output: <nil> true
}

// TestFixedOwnerDoesNotQueueBehindItsOwnWaiters: an owner that holds the
// lock (a reentrant view) takes it again at once, though other callers of
// the same Client wait for it.
func TestFixedOwnerDoesNotQueueBehindItsOwnWaiters(t *testing.T) {
	n := newNotifying()
	c := newClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	me := turnstile.WithOwner("job-42")
	outer, err := c.Acquire(ctx, "re", me)
	if err != nil {
		t.Fatal(err)
	}
	wg := waiters(ctx, c, "re", 3)
	for n.acquires.Load() < 4 { // the three have tried and wait in line
		time.Sleep(time.Millisecond)
	}
	short := turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 2 * time.Millisecond, MaxRetries: 3})
	inner, err := c.Acquire(ctx, "re", me, short)
	if err != nil {
		t.Fatalf("the holder's own second Acquire: %v", err)
	}
	_ = inner.Release(ctx)
	_ = outer.Release(ctx)
	wg.Wait()
}

// waiters starts n goroutines that each wait patiently for key through
// c and release it once they hold it; wait for them with the WaitGroup.
func waiters(ctx context.Context, c *turnstile.Client, key string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if l, err := c.Acquire(ctx, key, patient); err == nil {
				_ = l.Release(ctx)
			}
		})
	}
	return &wg
}

// sharedStore is the memory store marked as holding shared locks.
type sharedStore struct{ *notifying }

func (sharedStore) Shared() bool { return true }

// TestSharedBackendWaitersContendTogether: waiters on a shared lock are
// not lined up one behind another.
func TestSharedBackendWaitersContendTogether(t *testing.T) {
	n := newNotifying()
	c := newClient(t, sharedStore{n})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder, err := c.TryAcquire(ctx, "sh")
	if err != nil {
		t.Fatal(err)
	}
	wg := waiters(ctx, c, "sh", 4)
	// Each waiter attempts and subscribes on its own (a line would make
	// one attempt and one subscription for all).
	deadline := time.Now().Add(10 * time.Second)
	for n.subscribe.Load() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions for 4 waiters on a shared lock", n.subscribe.Load())
		}
		time.Sleep(time.Millisecond)
	}
	_ = holder.Release(ctx)
	wg.Wait()
}

// slowAcquire is the notifying store with attempts that take a while, so
// that concurrent first attempts overlap.
type slowAcquire struct{ *notifying }

func (s slowAcquire) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	time.Sleep(200 * time.Microsecond)
	return s.notifying.Acquire(ctx, key, owner, ttl)
}

// TestDistinctKeysAttemptOnce: callers of one Client that want different
// free keys at the same moment each make one attempt and never line up or
// subscribe to release notices, however many there are: only callers for
// the same key wait for each other's first attempt.
func TestDistinctKeysAttemptOnce(t *testing.T) {
	n := newNotifying()
	c := newClient(t, slowAcquire{n}, turnstile.WithoutWatchdog())
	ctx := context.Background()
	const workers, rounds = 256, 10
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				l, err := c.Acquire(ctx, fmt.Sprintf("distinct:%d:%d", w, r), patient)
				if err != nil {
					failed.Add(1)
					return
				}
				_ = l.Release(ctx)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d acquisitions failed", failed.Load())
	}
	if a, s := n.acquires.Load(), n.subscribe.Load(); a != workers*rounds || s != 0 {
		t.Errorf("%d attempts and %d subscriptions for %d free keys, want %d and 0", a, s, workers*rounds, workers*rounds)
	}
}

// eagerNotice delivers a release's notice before the release returns,
// as a Redis server may: its push reaches the subscriber's connection
// before the reply reaches the releaser's.
type eagerNotice struct{ *notifying }

func (e eagerNotice) Release(ctx context.Context, key, owner string) (bool, error) {
	e.releases.Add(1)
	ok, err := e.Backend.Release(ctx, key, owner)
	if ok && err == nil {
		e.notify(key)
		time.Sleep(time.Millisecond) // the reply comes later than the push
	}
	return ok, err
}

// notify sends key's release notice to every subscriber.
func (n *notifying) notify(key string) {
	n.mu.Lock()
	var chs []chan struct{}
	for ch := range n.subs[key] {
		chs = append(chs, ch)
	}
	n.mu.Unlock()
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// TestReleaseWakesOwnWaiter: a release through the store wakes the
// Client's own next waiter itself, also when the store's notice arrived
// before the release returned (the waiter set it aside while a lease of
// its line held the lock) or the Client takes no notices: with a Backoff
// of an hour, sleeping on it would end only with the context.
func TestReleaseWakesOwnWaiter(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []turnstile.Option
	}{
		{"notice before the release returns", nil},
		{"without notifications", []turnstile.Option{turnstile.WithoutNotifications()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := eagerNotice{newNotifying()}
			c := newClient(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			hour := turnstile.WithBackoff(turnstile.Constant{Interval: time.Hour, MaxRetries: -1})
			opts := append([]turnstile.Option{hour}, tc.opts...)
			const workers, each = 8, 25
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range each {
						l, err := c.Acquire(ctx, "aloud", opts...)
						if err != nil {
							t.Error(err)
							return
						}
						time.Sleep(100 * time.Microsecond) // the others line up
						if err := l.Release(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if r := e.releases.Load(); r != workers*each {
				t.Fatalf("%d releases through the store, want %d", r, workers*each)
			}
		})
	}
}
