package locktest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// RunFair runs the cases of a fair lock: h.New returns a driver.Queuer
// that hands a key to its waiters in arrival order, and h.Waiting counts
// its queue. With h.URL set the waiters come from two OS processes (and
// h.View, if set, names the view the child process applies).
func RunFair(t *testing.T, h Harness) {
	if h.New == nil || h.Waiting == nil {
		t.Fatal("locktest: RunFair needs Harness.New and Harness.Waiting")
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *Harness)
	}{
		{"ArrivalOrderKept", testArrivalOrder},
		{"CancelledWaiterLeaves", testCancelledWaiterLeaves},
		{"MutualExclusionQueued", testQueuedExclusion},
		{"RetryFirstThenQueue", testRetryFirstThenQueue},
		{"PlacesReported", testPlacesReported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, &h) })
	}
}

// queuer returns a fresh backend and fails unless it queues.
func (h *Harness) queuer(t *testing.T) driver.Backend {
	t.Helper()
	b := h.backend(t)
	if _, ok := b.(driver.Queuer); !ok {
		t.Fatalf("locktest: %T is no driver.Queuer", b)
	}
	return b
}

// awaitWaiting waits until key's queue holds want entries.
func awaitWaiting(t *testing.T, h *Harness, k string, want int, errs <-chan error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		// A waiter that gave up may leave the store's queue a moment
		// after its Acquire returned (ZooKeeper deletes its node then):
		// more entries than wanted is an error only if they stay.
		n := h.Waiting(t, k)
		if n == want {
			return
		}
		select {
		case err := <-errs:
			t.Fatalf("a waiter failed before it queued: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q still holds %d entries, want %d", k, n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testArrivalOrder: while a holder holds the key, eight waiters join its
// queue one after another — every other one in a child process when the
// store is shared — and take the lock in that order: the holders'
// fencing tokens, which grow with every grant, sort them by arrival.
func testArrivalOrder(t *testing.T, h *Harness) {
	const waiters = 8
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	holder := kindClient(t, h.queuer(t))
	first, err := holder.TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	base := h.Waiting(t, k)

	tokens := make([]atomic.Uint64, waiters)
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		if h.URL != "" && i%2 == 1 {
			cmd, out := queueInChild(t, h, k)
			wg.Go(func() {
				tok, err := readHeld(out)
				if err == nil {
					err = cmd.Wait()
				}
				if err != nil {
					errs <- errors.New("child waiter " + strconv.Itoa(i) + ": " + err.Error())
					return
				}
				tokens[i].Store(tok)
			})
		} else {
			c := kindClient(t, h.queuer(t), patient)
			wg.Go(func() {
				l, err := c.Acquire(ctx, k)
				if err != nil {
					errs <- err
					return
				}
				tokens[i].Store(l.Token())
				time.Sleep(10 * time.Millisecond) // the next in line must wait for this release
				if err := l.Release(ctx); err != nil {
					errs <- err
				}
			})
		}
		awaitWaiting(t, h, k, base+i+1, errs)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	order := make([]int, waiters)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(tokens[a].Load(), tokens[b].Load()) })
	for pos, i := range order {
		if pos != i {
			t.Fatalf("waiters took the lock in the order %v (by token), want arrival order", order)
		}
	}
	for i := range tokens {
		if tokens[i].Load() <= first.Token() {
			t.Fatalf("waiter %d got token %d, not greater than the first holder's %d", i, tokens[i].Load(), first.Token())
		}
	}
}

// queueInChild starts a child process that waits in key's queue, says
// "HELD token" once it holds the lock, releases it and exits.
func queueInChild(t *testing.T, h *Harness, key string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	env := map[string]string{}
	if h.View != "" {
		env[envView] = h.View
	}
	cmd := child(t, h, roleQueue, key, env)
	out, _ := startChild(t, cmd)
	return cmd, out
}

// readHeld reads the token a child reports in its "HELD token" line.
func readHeld(out *bufio.Reader) (uint64, error) {
	line, err := out.ReadString('\n')
	if err != nil {
		return 0, errors.New("child did not report holding the lock: " + err.Error())
	}
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "HELD "), 10, 64)
}

// testCancelledWaiterLeaves: a waiter whose context ends leaves the
// queue at once, with an error matching context.Canceled, and the waiter
// behind it takes the lock when the holder releases.
func testCancelledWaiterLeaves(t *testing.T, h *Harness) {
	k := key(t)
	ctx := ctxFor(t, time.Minute)
	holder := kindClient(t, h.queuer(t))
	l, err := holder.TryAcquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	base := h.Waiting(t, k)
	errs := make(chan error, 2)

	c1 := kindClient(t, h.queuer(t), patient)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := make(chan error, 1)
	go func() {
		_, err := c1.Acquire(wctx, k)
		gone <- err
	}()
	awaitWaiting(t, h, k, base+1, errs)

	c2 := kindClient(t, h.queuer(t), patient)
	got := make(chan *turnstile.Lease, 1)
	go func() {
		l, err := c2.Acquire(ctx, k)
		if err != nil {
			errs <- err
			return
		}
		got <- l
	}()
	awaitWaiting(t, h, k, base+2, errs)

	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter's Acquire = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled waiter did not return")
	}
	awaitWaiting(t, h, k, base+1, errs)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l2 := <-got:
		if l2.Token() <= l.Token() {
			t.Fatalf("next holder's token %d is not greater than %d", l2.Token(), l.Token())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the waiter behind a cancelled one never took the lock")
	}
}

// testQueuedExclusion: waiters on four instances queue for one key in
// turn; no two hold it at once and tokens grow with every grant.
func testQueuedExclusion(t *testing.T, h *Harness) {
	const clients, perClient, rounds = 4, 2, 8
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	var (
		inside, overlap atomic.Int32
		mu              sync.Mutex
		order           []uint64
		workers         []func() error
	)
	for range clients {
		c := kindClient(t, h.queuer(t), patient, turnstile.WithTTL(10*time.Second))
		for range perClient {
			workers = append(workers, func() error {
				l, err := c.Acquire(ctx, k)
				if err != nil {
					return err
				}
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				mu.Lock()
				order = append(order, l.Token())
				mu.Unlock()
				inside.Add(-1)
				return l.Release(ctx)
			})
		}
	}
	inTurn(t, rounds, workers)
	if n := overlap.Load(); n > 0 {
		t.Fatalf("%d critical sections overlapped", n)
	}
	checkIncreasing(t, "holder", order)
}
