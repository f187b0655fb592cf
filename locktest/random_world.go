package locktest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// world is one run of a scenario: its Clients over faulty backends, its
// workers, the oracle, and the watch on calls that do not return.
type world struct {
	t    testing.TB
	sc   *scenario
	seed uint64
	ctx  context.Context
	stop context.CancelFunc

	o          *oracle
	plan       [nOps]rates
	background chooser // draws for calls the Client makes on its own
	choose     func(worker int) chooser
	fence      Fence
	keys       []string
	elect      string

	clients   []*turnstile.Client
	bases     []driver.Backend
	elections []*turnstile.Election
	closedAt  []atomic.Int64 // unix nanoseconds when Close returned; 0: open

	stats stats

	mu      sync.Mutex
	failure string
	grants  map[[2]string]time.Time // (key, owner) → the store's last grant
	answers map[string][]driver.LockState
	calls   map[*call]struct{}
	obs     []*observer
}

// stats count what a run did, so that a scenario's log shows that its
// hot spots were hit.
type stats struct {
	leases, handed, writes, forced, removed, observed, closed, released, failedReleases atomic.Int64
}

func (s *stats) String() string {
	return fmt.Sprintf("%d leases (%d handed over without the store), %d writes, %d releases (%d failed), %d ForceReleases that removed a holder, %d evictions, %d steady leaders observed, %d Closes",
		s.leases.Load(), s.handed.Load(), s.writes.Load(), s.released.Load(), s.failedReleases.Load(), s.forced.Load(), s.removed.Load(), s.observed.Load(), s.closed.Load())
}

func (s *stats) add(o *stats) {
	for _, p := range [][2]*atomic.Int64{{&s.leases, &o.leases}, {&s.handed, &o.handed}, {&s.writes, &o.writes}, {&s.forced, &o.forced},
		{&s.removed, &o.removed}, {&s.observed, &o.observed}, {&s.closed, &o.closed}, {&s.released, &o.released}, {&s.failedReleases, &o.failedReleases}} {
		p[0].Add(p[1].Load())
	}
}

// hangSlack is how long a call may run past its context's deadline, and
// closeBound how long a call in flight when its Client closed may take
// to return: generous, for a loaded machine.
const (
	hangSlack  = 5 * time.Second
	closeBound = 3 * time.Second
)

// fail records a violation (the first one is reported) and ends the run.
func (w *world) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.mu.Lock()
	if w.failure == "" {
		w.failure = msg
	}
	w.mu.Unlock()
	w.stop()
}

func (w *world) failed() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}

// granted records that the store granted key to owner just now.
func (w *world) granted(key, owner string) {
	w.mu.Lock()
	w.grants[[2]string{key, owner}] = time.Now()
	w.mu.Unlock()
}

func (w *world) grantedAt(key, owner string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grants[[2]string{key, owner}]
}

// answered keeps the last few distinct answers of Inspect for key, which
// a stale answer repeats.
func (w *world) answered(key string, st driver.LockState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	same := func(a driver.LockState) bool {
		return a.Held == st.Held && len(a.Holders) == len(st.Holders) &&
			(len(a.Holders) == 0 || a.Holders[0].Owner == st.Holders[0].Owner && a.Holders[0].Token == st.Holders[0].Token)
	}
	as := w.answers[key]
	if len(as) > 0 && same(as[len(as)-1]) {
		return
	}
	as = append(as, st)
	if len(as) > 4 {
		as = as[1:]
	}
	w.answers[key] = as
}

// staleAnswer is an answer the store gave for key earlier: one of the
// last few, or the free key it was before its first grant.
func (w *world) staleAnswer(key string) driver.LockState {
	w.mu.Lock()
	defer w.mu.Unlock()
	as := w.answers[key]
	i := w.background.intn(len(as) + 1)
	if i == len(as) {
		return driver.LockState{Key: key, Waiters: -1}
	}
	st := as[i]
	st.Holders = slices.Clone(st.Holders)
	return st
}

// call is one call in flight, for the hang watch.
type call struct {
	what     string
	client   int
	start    time.Time
	deadline time.Time // the context's, zero if none
}

// track registers a call on client made with ctx; the returned function
// ends it.
func (w *world) track(client int, what string, ctx context.Context) func() {
	c := &call{what: what, client: client, start: time.Now()}
	c.deadline, _ = ctx.Deadline()
	w.mu.Lock()
	w.calls[c] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.calls, c)
		w.mu.Unlock()
	}
}

// closed returns when client's Close returned, or zero.
func (w *world) closed(client int) time.Time {
	if n := w.closedAt[client].Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// overdue lists the calls that run past their bounds at now.
func (w *world) overdue(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var late []string
	for c := range w.calls {
		limit := time.Time{}
		if !c.deadline.IsZero() {
			limit = c.deadline.Add(hangSlack)
		}
		if at := w.closed(c.client); !at.IsZero() && c.start.Before(at) && (limit.IsZero() || at.Add(closeBound).Before(limit)) {
			limit = at.Add(closeBound)
		}
		if !limit.IsZero() && now.After(limit) {
			why := "past its context's deadline"
			if at := w.closed(c.client); !at.IsZero() && c.start.Before(at) {
				why = fmt.Sprintf("after its Client's Close returned %v ago", now.Sub(at).Round(time.Millisecond))
			}
			late = append(late, fmt.Sprintf("%s on client %d has run %v, %s", c.what, c.client, now.Sub(c.start).Round(time.Millisecond), why))
		}
	}
	slices.Sort(late)
	return late
}

// watch fails the run when a call runs past its bounds.
func (w *world) watch(done <-chan struct{}) {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			if late := w.overdue(now); len(late) > 0 {
				w.fail("a call hangs: %s", strings.Join(late, "; "))
			}
		}
	}
}

// awaitClosed waits, before the run's context ends them, for the calls
// in flight on a closed Client to return: they must by themselves, and
// the watch fails the run if they do not in time.
func (w *world) awaitClosed() {
	for w.ctx.Err() == nil {
		pending := false
		w.mu.Lock()
		for c := range w.calls {
			if at := w.closed(c.client); !at.IsZero() && c.start.Before(at) {
				pending = true
			}
		}
		w.mu.Unlock()
		if !pending || sleep(w.ctx, 10*time.Millisecond) {
			return
		}
	}
}

// run runs the scenario for d and tears it down: every worker must end
// once the run's context is done, every Client must close, and every
// call must return within its bounds.
func (w *world) run(d time.Duration) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { w.watch(done) })
	var workers sync.WaitGroup
	w.sc.start(w, &workers)
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-w.ctx.Done():
	}
	timer.Stop()
	w.awaitClosed()
	w.stop()
	ended := make(chan struct{})
	go func() { workers.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(hangSlack + closeBound):
		w.fail("workers still running %v after the run's context ended: %s", hangSlack+closeBound, strings.Join(w.overdue(time.Now().Add(time.Hour)), "; "))
		<-ended // the calls end with their contexts, or the test times out showing them
	}
	for i, c := range w.clients {
		end := w.track(i, "Close", context.Background())
		_ = c.Close()
		end()
	}
	close(done)
	wg.Wait()
	for _, b := range w.bases {
		if c, ok := b.(io.Closer); ok {
			_ = c.Close()
		}
	}
}
