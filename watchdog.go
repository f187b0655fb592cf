package turnstile

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

const (
	// batchWindow: renewals due within this much of each other go to the
	// store together.
	batchWindow = 2 * time.Millisecond
	// maxBatch bounds one ExtendMany call.
	maxBatch = 512
)

// idleLinger is how long the scheduler waits with no lease held before
// it ends: a lease added meanwhile, due after the linger, costs it no
// wake-up.
const idleLinger = 500 * time.Millisecond

// watchdog renews every held lease of one Client from a single scheduler:
// leases sit in a heap ordered by their next action, so a million held
// leases cost a million heap entries, not a million goroutines or timers.
// The scheduler goroutine runs only while leases are held, and for
// idleLinger after the last one ends.
//
// A lease is in the heap exactly while it is held. Its due time is its next
// renewal; while a renewal is in flight, or when the lease has no watchdog,
// its due time is its deadline, so that a store that never answers still
// gets the lease declared lost on time.
type watchdog struct {
	c     *Client
	batch driver.BatchExtender // nil if the backend cannot batch

	mu      sync.Mutex
	h       leaseHeap
	running bool
	closed  bool
	// wakeAt is when the scheduler's timer fires, while it sleeps on one;
	// zero while it is about to look at the heap again anyway.
	wakeAt mono
	kick   chan struct{}
	scans  atomic.Int64 // times the scheduler looked at the heap
	wg     sync.WaitGroup
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{c: c, kick: make(chan struct{}, 1)}
	w.batch, _ = c.backend.(driver.BatchExtender)
	return w
}

// add starts watching a freshly acquired lease. It reports false, and
// leaves the lease closed, if the Client is closed.
func (w *watchdog) add(l *Lease, sent mono) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		l.state = leaseClosed
		l.cancel(ErrClosed)
		return false
	}
	l.due = l.deadline
	if l.renewEvery > 0 {
		l.due = sent.add(l.renewEvery)
	}
	heap.Push(&w.h, l)
	w.wakeLocked(l.index == 0)
	return true
}

// wakeLocked makes sure the scheduler runs and, if the earliest action
// changed to before the scheduler's next look at the heap, looks at the
// heap again. A lease that is due later is seen at that look: taking a
// lock costs no wake-up of the scheduler, however often locks are taken
// and released.
func (w *watchdog) wakeLocked(changedTop bool) {
	if !w.running {
		w.running = true
		w.wg.Add(1)
		go w.loop()
		return
	}
	if changedTop && w.wakeAt != 0 && w.h[0].due < w.wakeAt {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// remove stops watching l (Release). Caller holds w.mu.
func (w *watchdog) remove(l *Lease) {
	if l.index >= 0 {
		heap.Remove(&w.h, l.index)
	}
}

// lose ends l with cause, which matches ErrLockLost: the store refused
// to extend it (by the watchdog if renewal is set).
func (w *watchdog) lose(l *Lease, cause error, renewal bool) {
	w.mu.Lock()
	ok := w.loseLocked(l)
	w.mu.Unlock()
	if ok {
		w.reportLost(l, cause, true, renewal)
	}
}

// loseLocked moves a held lease to lost; it reports whether l was held.
// A lease on its way to being released cannot be lost any more.
func (w *watchdog) loseLocked(l *Lease) bool {
	if l.state != leaseHeld {
		return false
	}
	l.state = leaseLost
	w.remove(l)
	return true
}

func (w *watchdog) reportLost(l *Lease, cause error, refused, renewal bool) {
	l.cancel(cause)
	w.c.leaseEnded(l, false)
	w.c.cfg.logger.Warn("turnstile: lease lost", "key", l.key, "token", l.token, "backend", w.c.name, "cause", cause)
	w.c.emit(l.cfg, Event{Type: EventLost, Key: l.key, Owner: l.owner, Token: l.token, Refused: refused, Renewal: renewal, Err: cause})
}

// extended records a renewal the holder made itself with Lease.Extend. It
// reports whether the lease took it (it is still held and no later Extend
// overtook this one).
func (w *watchdog) extended(l *Lease, gen uint64, sent mono, ttl time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.state != leaseHeld || l.gen != gen || l.index < 0 {
		return false
	}
	l.ttl = ttl
	l.drift = l.cfg.drift(ttl)
	if l.renewEvery > 0 {
		l.renewEvery = l.cfg.renewInterval(ttl)
		if l.renewEvery >= ttl-l.drift {
			l.renewEvery = max(ttl/3, time.Microsecond)
		}
	}
	l.deadline = sent.add(ttl - l.drift)
	l.inflight = false
	l.due = l.deadline
	if l.renewEvery > 0 {
		l.due = sent.add(l.renewEvery)
	}
	heap.Fix(&w.h, l.index)
	w.wakeLocked(l.index == 0)
	return true
}

// extendUnknown records an Extend to ttl, sent at sent, whose outcome is
// unknown: the store may set the lock's expiry to ttl from whenever the
// request reaches it. A longer ttl only makes the lock outlive what the
// lease believes; a shorter one becomes the lease's TTL from now on — its
// deadline counts from sent with it, and the watchdog renews with it — as
// if the Extend had been confirmed, except that the deadline is never
// moved later: later confirmed renewals then cannot be overtaken by the
// request arriving late with the shorter TTL.
func (w *watchdog) extendUnknown(l *Lease, sent mono, ttl time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.state != leaseHeld || ttl >= l.ttl || l.index < 0 {
		return
	}
	l.ttl = ttl
	l.drift = l.cfg.drift(ttl)
	if l.renewEvery > 0 {
		l.renewEvery = l.cfg.renewInterval(ttl)
		if l.renewEvery >= ttl-l.drift {
			l.renewEvery = max(ttl/3, time.Microsecond)
		}
	}
	l.deadline = min(l.deadline, sent.add(ttl-l.drift))
	l.due = min(l.due, l.deadline)
	if l.renewEvery > 0 && !l.inflight {
		l.due = min(l.due, sent.add(l.renewEvery))
	}
	heap.Fix(&w.h, l.index)
	w.wakeLocked(l.index == 0)
}

// close ends every held lease with ErrClosed and stops the scheduler.
func (w *watchdog) close() {
	w.mu.Lock()
	w.closed = true
	leases := append([]*Lease(nil), w.h...)
	for _, l := range leases {
		l.state = leaseClosed
		w.remove(l)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
	w.mu.Unlock()
	for _, l := range leases {
		l.cancel(ErrClosed)
		w.c.leaseEnded(l, false)
		w.c.emit(l.cfg, Event{Type: EventLost, Key: l.key, Owner: l.owner, Token: l.token, Err: ErrClosed})
	}
	w.wg.Wait()
}

// pending is one renewal on its way to the store.
type pending struct {
	l   *Lease
	gen uint64
	ttl time.Duration
}

func (w *watchdog) loop() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var expired []*Lease
	idle := false // the last look found no lease
	for {
		w.mu.Lock()
		w.scans.Add(1)
		if w.closed || (len(w.h) == 0 && idle) {
			w.running = false
			w.mu.Unlock()
			return
		}
		// An empty heap: linger before ending. A Client that takes one
		// lock at a time mostly finds its heap empty, and would otherwise
		// start the scheduler anew for every lease.
		idle = len(w.h) == 0
		t := now()
		var batch []pending
		expired = expired[:0]
		for len(w.h) > 0 && len(batch) < maxBatch {
			l := w.h[0]
			if l.due > t.add(batchWindow) || (l.due > t && (l.inflight || l.renewEvery == 0)) {
				break
			}
			if t >= l.deadline {
				w.loseLocked(l)
				expired = append(expired, l)
				continue
			}
			l.inflight = true
			l.due = l.deadline
			heap.Fix(&w.h, 0)
			batch = append(batch, pending{l: l, gen: l.gen, ttl: l.ttl})
		}
		var wait time.Duration
		switch {
		case idle:
			wait = idleLinger
		case len(batch) == 0 && len(expired) == 0 && len(w.h) > 0:
			wait = time.Duration(w.h[0].due - t)
		}
		w.wakeAt = 0
		if wait > 0 {
			w.wakeAt = t.add(wait)
		}
		w.mu.Unlock()

		for _, l := range expired {
			var cause error
			switch {
			case l.renewEvery == 0:
				cause = fmt.Errorf("%w: ttl expired (no watchdog)", ErrLockLost)
			case l.renewErr != nil:
				cause = fmt.Errorf("%w: local deadline passed, last renewal failed: %w", ErrLockLost, l.renewErr)
			default:
				cause = fmt.Errorf("%w: local deadline passed without a confirmed renewal", ErrLockLost)
			}
			w.reportLost(l, cause, false, l.renewEvery > 0)
		}
		if len(batch) > 0 {
			w.wg.Add(1)
			go w.renew(batch)
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-w.kick:
			}
		}
	}
}

// renew sends one batch of renewals and files the results.
func (w *watchdog) renew(batch []pending) {
	defer w.wg.Done()
	sent := now()
	w.mu.Lock()
	earliest := batch[0].l.deadline
	for _, p := range batch[1:] {
		earliest = min(earliest, p.l.deadline)
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(earliest-sent))
	defer cancel()

	results := make([]driver.ExtendResult, len(batch))
	switch {
	case len(batch) == 1:
		p := batch[0]
		results[0].OK, results[0].Err = w.c.backend.Extend(ctx, p.l.key, p.l.owner, p.l.cfg.storeTTL(p.ttl))
	case w.batch != nil:
		reqs := make([]driver.ExtendRequest, len(batch))
		for i, p := range batch {
			reqs[i] = driver.ExtendRequest{Key: p.l.key, Owner: p.l.owner, TTL: p.l.cfg.storeTTL(p.ttl)}
		}
		results = w.batch.ExtendMany(ctx, reqs)
	default:
		var wg sync.WaitGroup
		for i, p := range batch {
			wg.Go(func() {
				results[i].OK, results[i].Err = w.c.backend.Extend(ctx, p.l.key, p.l.owner, p.l.cfg.storeTTL(p.ttl))
			})
		}
		wg.Wait()
	}

	type loss struct {
		l       *Lease
		cause   error
		refused bool
	}
	var lost []loss
	type observed struct {
		cfg *config
		e   Event
	}
	var events []observed // renewals confirmed or failed, for the observers
	w.mu.Lock()
	t := now()
	for i, p := range batch {
		l := p.l
		if l.state != leaseHeld || l.index < 0 || !l.inflight {
			continue
		}
		if l.gen != p.gen {
			// The holder called Extend meanwhile and it has not completed
			// (a completed Extend clears inflight): renew again soon.
			l.inflight = false
			l.due = min(t.add(time.Millisecond), l.deadline)
			heap.Fix(&w.h, l.index)
			continue
		}
		var r driver.ExtendResult
		if i < len(results) {
			r = results[i]
		} else {
			r.Err = fmt.Errorf("backend returned %d results for %d renewals", len(results), len(batch))
		}
		l.inflight = false
		switch {
		case r.Err == nil && r.OK:
			l.renewErr = nil
			l.deadline = sent.add(p.ttl - l.drift)
			l.due = sent.add(l.renewEvery)
			if len(l.cfg.observers) > 0 {
				events = append(events, observed{l.cfg, Event{Type: EventExtended, Key: l.key, Owner: l.owner, Token: l.token,
					Validity: max(0, time.Duration(l.deadline-t)), Renewal: true}})
			}
		case r.Err == nil:
			w.loseLocked(l)
			lost = append(lost, loss{l, fmt.Errorf("%w: renewal refused, the key is no longer held by this owner", ErrLockLost), true})
			continue
		case t >= l.deadline:
			w.loseLocked(l)
			lost = append(lost, loss{l, fmt.Errorf("%w: renewal failed until the local deadline: %w", ErrLockLost, r.Err), false})
			continue
		default:
			// Transient failure: try again soon, but never past the deadline.
			if len(l.cfg.observers) > 0 {
				events = append(events, observed{l.cfg, Event{Type: EventRenewFailed, Key: l.key, Owner: l.owner, Token: l.token,
					Renewal: true, Err: r.Err}})
			}
			l.renewErr = r.Err
			retry := max(min(l.renewEvery/4, time.Second), time.Millisecond)
			l.due = min(t.add(retry), l.deadline)
			w.c.cfg.logger.Debug("turnstile: renewal failed, retrying", "key", l.key, "err", r.Err)
		}
		heap.Fix(&w.h, l.index)
	}
	if !w.closed && len(w.h) > 0 {
		w.wakeLocked(true) // due times moved: the scheduler must look again
	}
	w.mu.Unlock()
	for _, x := range events {
		w.c.emit(x.cfg, x.e)
	}
	for _, x := range lost {
		w.reportLost(x.l, x.cause, x.refused, true)
	}
}

// leaseHeap orders leases by their next watchdog action.
type leaseHeap []*Lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*Lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*h = old[:len(old)-1]
	return l
}
