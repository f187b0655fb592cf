package turnstile

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// How Acquire waits for a lock that is held (SPEC S-1.3, S-4.5, S-9.3).
//
// A waiter retries on three signals: a release notice from the store (when
// the backend is a driver.Notifier and notifications are on), a release by
// another lease of the same Client, and the Backoff's timer. The timer is
// the safety net for a lost notice and the only signal for stores that
// cannot notify; only its rounds count against the Backoff's retries, so a
// waiter woken by notices that keeps losing the race is not pushed out by
// them.
//
// With coalescing on (the default), the waiters of one Client for one key
// form a local line, first come first served: only the head of the line
// contends with the store, the others wait for their turn without a round
// trip. A release then costs one store attempt per process that waits,
// not one per waiter. While the head's predecessor holds the lock, the
// head ignores release notices from the store (they are for an earlier
// release) and waits for that lease to end locally.

// contender is the state of one Acquire call while it contends for a key.
type contender struct {
	c       *Client
	key     string
	cfg     *config
	owner   string
	tries   int // attempts made
	rounds  int // Backoff timer rounds
	waited  bool
	lastErr error
}

// retries is what the caller is told: attempts after the first.
func (k *contender) retries() int { return max(0, k.tries-1) }

// fail wraps err as the outcome of the acquisition.
func (k *contender) fail(err error) error { return k.c.wrap("acquire", k.key, err) }

// cancelled is the error for a context that ended the wait.
func (k *contender) cancelled(ctx context.Context) error {
	return k.fail(errors.Join(context.Cause(ctx), k.lastErr))
}

// startWaiting tells the observers, once, that the call waits.
func (k *contender) startWaiting() {
	if !k.waited {
		k.waited = true
		k.c.emit(k.cfg, Event{Type: EventWaiting, Key: k.key})
	}
}

// try makes one attempt. It returns the lease, or (nil, nil) with the
// reason in lastErr, or an error that ends the wait.
func (k *contender) try(ctx context.Context) (*Lease, error) {
	if ctx.Err() != nil {
		return nil, k.cancelled(ctx)
	}
	c, cfg := k.c, k.cfg
	k.tries++
	sent := now()
	token, ok, err := c.backend.Acquire(ctx, k.key, k.owner, cfg.ttl)
	switch {
	case ok && err == nil:
		l := c.newLease(ctx, k.key, k.owner, token, sent, cfg)
		if l != nil {
			return l, nil
		}
		// Born expired: the round trip ate the whole validity.
		c.releaseInBackground(k.key, k.owner, cfg.ttl)
		k.owner = newOwner(cfg)
		k.lastErr = fmt.Errorf("%w: acquisition took longer than the ttl %v allows", ErrNotAcquired, cfg.ttl)
	case err != nil:
		// The outcome is unknown: the lock may have been taken.
		c.abandon(cfg, k.key, k.owner)
		k.owner = newOwner(cfg)
		if ctx.Err() != nil {
			return nil, k.fail(errors.Join(context.Cause(ctx), err))
		}
		k.lastErr = err
		c.cfg.logger.Debug("turnstile: acquire failed", "key", k.key, "backend", c.name, "attempt", k.tries, "err", err)
	default:
		k.lastErr = ErrNotAcquired
	}
	return nil, nil
}

// giveUp is the error once the Backoff has no retry left.
func (k *contender) giveUp() error {
	err := k.lastErr
	if err == nil {
		err = ErrNotAcquired
	} else if !errors.Is(err, ErrNotAcquired) {
		err = errors.Join(ErrNotAcquired, err)
	}
	return k.fail(fmt.Errorf("%w (after %d retries)", err, k.retries()))
}

// signals are what wakes a waiter besides its timer.
type signals struct {
	notice <-chan struct{} // release notices from the store
	local  <-chan struct{} // releases by this Client (local line only)
	// heldHere reports whether the lock is held by a lease of this
	// Client; notices are ignored meanwhile (local line only).
	heldHere func() bool
	// slot takes handoffs from a releasing lease of this Client (local
	// line only, driver.HandOff).
	slot *handoffSlot
}

// handoffSlot is where a line's head receives the lock from a releasing
// lease of its own Client (driver.HandOff).
type handoffSlot struct {
	ln *line
	w  *waiter
}

// handoff is the outcome of one HandOff to a waiter.
type handoff struct {
	owner   string // the owner the lock was handed to
	token   uint64
	sent    mono // when the HandOff was sent: the lease's TTL starts later
	ok      bool // handed over
	unknown bool // the store failed: the lock may or may not be the waiter's
}

// open makes the head a target for handoffs while it waits.
func (h *handoffSlot) open(k *contender) {
	h.ln.mu.Lock()
	h.w.ready, h.w.owner, h.w.ttl = true, k.owner, k.cfg.ttl
	h.ln.mu.Unlock()
}

// close ends that; it reports whether a handoff to the head is on its
// way, which the head must then wait for: its owner id is in use.
func (h *handoffSlot) close() (inflight bool) {
	h.ln.mu.Lock()
	defer h.ln.mu.Unlock()
	h.w.ready = false
	return h.w.inflight
}

// contend retries until the lock is taken, the Backoff gives up, or ctx
// is done. If first is set it attempts at once, otherwise it waits for a
// signal first.
//
// A notice or local release restarts the safety-net timer: while the lock
// changes hands and says so, there is nothing to poll for. Once that has
// happened the wait is also bounded by the Backoff's total (maxWait), as
// its rounds alone no longer are.
func (k *contender) contend(ctx context.Context, sig signals, first bool) (*Lease, error) {
	if first && sig.slot != nil {
		// A head made ready for a handoff when it was promoted: take
		// what is on its way before attempting with the same owner id.
		if l, _, done, err := k.pending(ctx, sig.slot); done {
			return l, err
		}
	}
	if first {
		if l, err := k.try(ctx); l != nil || err != nil {
			return l, err
		}
	}
	var budget <-chan time.Time
	if total, bounded := maxWaitOf(k.cfg.backoff); bounded && (sig.notice != nil || sig.local != nil) {
		b := time.NewTimer(total)
		defer b.Stop()
		budget = b.C
	}
	var timer *time.Timer
	armed, resets := false, 0
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if sig.slot != nil {
			sig.slot.open(k)
		}
		if !armed {
			delay, more := k.cfg.backoff.Delay(k.rounds)
			if !more {
				if sig.slot != nil && sig.slot.close() {
					if l, err := k.receive(ctx, sig.slot); l != nil || err != nil {
						return l, err
					}
				}
				return nil, k.giveUp()
			}
			if timer == nil {
				timer = time.NewTimer(delay)
			} else {
				timer.Reset(delay)
			}
			armed = true
		}
		var grant <-chan handoff
		if sig.slot != nil {
			grant = sig.slot.w.grant
		}
		select {
		case <-ctx.Done():
			return nil, k.cancelled(ctx)
		case <-budget:
			if resets > 0 {
				return nil, k.giveUp()
			}
			budget = nil // no signal came: the rounds decide
			continue
		case g := <-grant:
			if sig.slot != nil {
				sig.slot.close()
			}
			if l, done, err := k.take(ctx, g); done {
				return l, err
			}
			continue
		case <-timer.C:
			armed = false
			k.rounds++
		case <-sig.notice:
			timer.Stop() // no stale value after Stop (Go 1.23 timers)
			armed = false
			resets++
		case <-sig.local:
			timer.Stop()
			armed = false
			resets++
		}
		if sig.slot != nil {
			l, handled, done, err := k.pending(ctx, sig.slot)
			if done {
				return l, err
			}
			if handled {
				continue // a handoff came and did not end the wait
			}
		}
		if sig.heldHere != nil && sig.heldHere() {
			continue // held by a lease of ours: its release wakes us locally
		}
		if l, err := k.try(ctx); l != nil || err != nil {
			return l, err
		}
	}
}

// pending closes the slot and takes a handoff that reached it or is on
// its way (attempting nothing meanwhile: the owner id is in use).
// handled reports that there was one; done, that it ended the wait with a
// lease or an error.
func (k *contender) pending(ctx context.Context, slot *handoffSlot) (l *Lease, handled, done bool, err error) {
	inflight := slot.close()
	select {
	case g := <-slot.w.grant: // arrived as another signal did
		l, done, err = k.take(ctx, g)
		return l, true, done, err
	default:
	}
	if !inflight {
		return nil, false, false, nil
	}
	l, err = k.receive(ctx, slot)
	return l, true, l != nil || err != nil, err
}

// receive waits for the handoff on its way to the head.
func (k *contender) receive(ctx context.Context, slot *handoffSlot) (*Lease, error) {
	select {
	case <-ctx.Done():
		return nil, k.cancelled(ctx)
	case g := <-slot.w.grant:
		l, _, err := k.take(ctx, g)
		return l, err
	}
}

// take turns a handoff into a lease. done reports that the wait is over
// (a lease or an error); otherwise the caller goes on waiting.
func (k *contender) take(ctx context.Context, g handoff) (l *Lease, done bool, err error) {
	if g.owner != k.owner {
		return nil, false, nil // for an owner id this call no longer uses
	}
	switch {
	case g.ok:
		if l := k.c.newLease(ctx, k.key, k.owner, g.token, g.sent, k.cfg); l != nil {
			return l, true, nil
		}
		// Born expired: the handoff took longer than the TTL allows.
		k.c.releaseInBackground(k.key, k.owner, k.cfg.ttl)
		k.owner = newOwner(k.cfg)
		k.lastErr = fmt.Errorf("%w: handoff took longer than the ttl %v allows", ErrNotAcquired, k.cfg.ttl)
		return nil, false, nil
	default:
		// Not handed over, or unknown: ask the store. With the same owner
		// id, an attempt takes over a lock the handoff did give us.
		l, err := k.try(ctx)
		return l, l != nil || err != nil, err
	}
}

// waitFor is Acquire's waiting path for a backend that does not queue
// waiters itself.
func (c *Client) waitFor(ctx context.Context, k *contender) (*Lease, error) {
	// A line admits one waiter at a time: right for exclusive locks only.
	// And a fixed owner may hold the lock already (a reentrant view): it
	// must not queue behind waiters that wait for it.
	if k.cfg.coalesce && !c.shared && k.cfg.owner == "" {
		return c.waitInLine(ctx, k)
	}
	if l, err := k.try(ctx); l != nil || err != nil {
		return l, err
	}
	k.startWaiting()
	var sig signals
	if n, ok := c.backend.(driver.Notifier); ok && k.cfg.notify {
		ch, stop, err := n.Released(ctx, k.key)
		if err != nil {
			c.cfg.logger.Debug("turnstile: release notices unavailable, polling", "key", k.key, "backend", c.name, "err", err)
		} else {
			defer stop()
			sig.notice = ch
			// A release between the failed attempt and the subscription
			// sent no notice we could see: look again now.
			return k.contend(ctx, sig, true)
		}
	}
	return k.contend(ctx, sig, false)
}

// waitInLine waits in the Client's local line for key (see the comment at
// the top of this file).
func (c *Client) waitInLine(ctx context.Context, k *contender) (*Lease, error) {
	// Try at once if nobody of this Client waits for the key, and nobody
	// is trying it right now: callers arriving together then make one
	// attempt between them, and the others line up.
	tried := false
	if !c.lineBusy(k.key) {
		h := maphash.String(c.seed, k.key)
		slot := &c.trying[h%uint64(len(c.trying))]
		h |= 1 << 63 // 0 marks a free slot
		mine := slot.CompareAndSwap(0, h)
		// A slot taken by another key leaves this attempt unregistered:
		// callers for this key may then attempt together, which costs an
		// attempt, never a wrong answer (the store decides who wins).
		if mine || slot.Load() != h {
			l, err := k.try(ctx)
			if mine {
				slot.Store(0)
			}
			if l != nil || err != nil {
				return l, err
			}
			tried = true
		}
	}
	k.startWaiting()
	ln, w := c.joinLine(k)
	var won *Lease
	defer func() { ln.leave(c, w, won) }()

	queued, err := k.awaitTurn(ctx, w)
	if err != nil {
		return nil, err
	}
	sig := signals{local: ln.local, heldHere: ln.heldHere}
	if _, ok := c.backend.(driver.HandOff); ok {
		sig.slot = &handoffSlot{ln: ln, w: w}
	}
	// Attempt at once unless this call has just failed one, or the
	// previous head has just taken the lock.
	first := !w.afterGrant && (queued || !tried)
	if ch, fresh := ln.subscribe(c, k.cfg); ch != nil {
		sig.notice = ch
		first = first || fresh
	}
	l, err := k.contend(ctx, sig, first)
	if l != nil {
		won = l
	}
	return l, err
}

// awaitTurn waits until w heads its line, and reports whether it had to
// wait. A waiter behind others waits at most the longest total wait its
// Backoff allows (Exponential: the sum of its retries' ceilings), then
// gives up with ErrNotAcquired.
func (k *contender) awaitTurn(ctx context.Context, w *waiter) (bool, error) {
	select {
	case <-w.turn:
		return false, nil
	default:
	}
	var expired <-chan time.Time
	budget, bounded := maxWaitOf(k.cfg.backoff)
	if bounded {
		t := time.NewTimer(budget)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.turn:
		return true, nil
	case <-ctx.Done():
		return true, k.cancelled(ctx)
	case <-expired:
		return true, k.fail(fmt.Errorf("%w (waited %v behind other waiters of this process)", ErrNotAcquired, budget))
	}
}

// maxWaitOf is the longest total wait b allows, if it says.
func maxWaitOf(b Backoff) (time.Duration, bool) {
	if m, ok := b.(interface{ maxWait() (time.Duration, bool) }); ok {
		return m.maxWait()
	}
	return 0, false
}

// line is the queue of one Client's waiters for one key.
type line struct {
	key   string
	local chan struct{} // a lease of this Client on key ended

	mu      sync.Mutex
	waiters []*waiter // waiters[0] is the head
	holding *Lease    // the lease a waiter of this line won, until it ends
	notice  <-chan struct{}
	stopSub func()
	subbed  bool // a subscription was attempted
	dead    bool // out of the Client's map: join a new line

	// Handing over within the Client (driver.QuietReleaser).
	quietRun     int  // releases in a row without a notice
	quietPending bool // a quiet release that no waiter of the line took yet
	noWake       bool // the last release woke the head otherwise, or was aloud for fairness
}

// maxQuietRun is how many releases in a row a Client hands to its own
// waiters without telling other processes; then one release is aloud and
// its own waiters race the others for it, so that no process starves.
const maxQuietRun = 16

// waiter is one Acquire call in a line.
type waiter struct {
	turn chan struct{} // closed when the waiter becomes the head
	// Handoffs (driver.HandOff), guarded by the line's mu: the head is
	// ready for one while it waits; inflight while one is on its way to
	// owner; its outcome arrives on grant.
	ready, inflight bool
	owner           string
	ttl             time.Duration
	grant           chan handoff
	// afterGrant: the previous head took the lock, so the new head waits
	// for its release instead of attempting at once. Written before turn
	// is closed.
	afterGrant bool
}

// lineBusy reports whether waiters of this Client already queue for key.
func (c *Client) lineBusy(key string) bool {
	v, ok := c.lines.Load(key)
	if !ok {
		return false
	}
	ln := v.(*line)
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return !ln.dead && len(ln.waiters) > 0
}

// joinLine puts k at the tail of its key's line.
func (c *Client) joinLine(k *contender) (*line, *waiter) {
	key := k.key
	w := &waiter{turn: make(chan struct{}), grant: make(chan handoff, 1), owner: k.owner, ttl: k.cfg.ttl}
	for {
		v, ok := c.lines.Load(key)
		if !ok {
			v, _ = c.lines.LoadOrStore(key, &line{key: key, local: make(chan struct{}, 1)})
		}
		ln := v.(*line)
		ln.mu.Lock()
		if ln.dead {
			ln.mu.Unlock()
			continue
		}
		ln.waiters = append(ln.waiters, w)
		if len(ln.waiters) == 1 {
			close(w.turn)
		}
		ln.mu.Unlock()
		return ln, w
	}
}

// leave takes w out of its line. won is the lease w took, if any: the
// next head then waits for it to end.
func (ln *line) leave(c *Client, w *waiter, won *Lease) {
	var stop func()
	ln.mu.Lock()
	for i, x := range ln.waiters {
		if x != w {
			continue
		}
		copy(ln.waiters[i:], ln.waiters[i+1:])
		ln.waiters[len(ln.waiters)-1] = nil
		ln.waiters = ln.waiters[:len(ln.waiters)-1]
		if i == 0 && len(ln.waiters) > 0 {
			next := ln.waiters[0]
			next.afterGrant = won != nil
			// The new head will wait for this grant's release: it can take
			// a handoff from it at once, before it even runs.
			next.ready = won != nil && c.canHandOff
			close(next.turn)
		}
		break
	}
	if won != nil {
		ln.quietPending = false
	}
	if won != nil && won.ctx.Err() == nil {
		// The next head waits for this lease to end (leaseEnded clears
		// holding; it runs after the lease's context is cancelled, so a
		// lease that ended already is never recorded here).
		ln.holding = won
		// Notices until now are for releases before this grant.
		select {
		case <-ln.notice:
		default:
		}
		select {
		case <-ln.local:
		default:
		}
	}
	// A handoff that reached w after it stopped waiting: give the lock
	// back (unless it is the lease w won).
	var orphan string
	select {
	case g := <-w.grant:
		if (g.ok || g.unknown) && (won == nil || won.owner != g.owner) {
			orphan = g.owner
		}
	default:
	}
	notify := false
	if len(ln.waiters) == 0 {
		ln.dead = true
		c.lines.CompareAndDelete(ln.key, ln)
		stop, ln.stopSub = ln.stopSub, nil
		// Released quietly for a waiter that did not take the lock: the
		// waiters of other processes must hear of it after all.
		notify = ln.quietPending
	}
	ln.mu.Unlock()
	if stop != nil {
		stop()
	}
	if notify {
		c.notifyInBackground(ln.key)
	}
	if orphan != "" {
		c.releaseInBackground(ln.key, orphan, w.ttl)
	}
}

// releaseInStore releases l's lock in the store. When the head of this
// Client's line for the key waits for it, the lock is handed to the head
// in the same round trip (driver.HandOff), or released quietly for it
// (driver.QuietReleaser); every maxQuietRun-th release is aloud instead.
func (c *Client) releaseInStore(ctx context.Context, l *Lease) (bool, error) {
	ho, canHand := c.backend.(driver.HandOff)
	qr, canQuiet := c.backend.(driver.QuietReleaser)
	if !canHand && !canQuiet {
		return c.backend.Release(ctx, l.key, l.owner)
	}
	v, found := c.lines.Load(l.key)
	if !found {
		return c.backend.Release(ctx, l.key, l.owner)
	}
	ln := v.(*line)
	var to *waiter
	quiet := false
	ln.mu.Lock()
	if !ln.dead && len(ln.waiters) > 0 {
		if ln.quietRun < maxQuietRun {
			ln.quietRun++
			if head := ln.waiters[0]; canHand && head.ready && !head.inflight {
				to = head
				to.inflight = true
				ln.noWake = true // the handoff wakes the head
			} else if canQuiet {
				quiet = true
				ln.quietPending = true
			}
		} else {
			ln.quietRun = 0
			ln.noWake = true
		}
	}
	var owner string
	var ttl time.Duration
	if to != nil {
		owner, ttl = to.owner, to.ttl
	}
	ln.mu.Unlock()

	switch {
	case to != nil:
		sent := now()
		token, ok, err := ho.HandOff(ctx, l.key, l.owner, owner, ttl)
		g := handoff{owner: owner, token: token, sent: sent, ok: ok && err == nil, unknown: err != nil}
		ln.mu.Lock()
		to.inflight = false
		waiting := slices.Contains(ln.waiters, to)
		if waiting {
			select {
			case to.grant <- g: // cap 1: one handoff in flight per waiter
			default:
				waiting = false
			}
		}
		ln.mu.Unlock()
		if !waiting && (g.ok || g.unknown) {
			c.releaseInBackground(l.key, owner, ttl) // it gave up meanwhile
		}
		return ok, err
	case quiet:
		return qr.ReleaseQuiet(ctx, l.key, l.owner)
	default:
		return c.backend.Release(ctx, l.key, l.owner)
	}
}

// notifyInBackground sends key's release notice; Close waits for it.
func (c *Client) notifyInBackground(key string) {
	qr, ok := c.backend.(driver.QuietReleaser)
	if !ok {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := qr.Notify(ctx, key); err != nil {
			c.cfg.logger.Debug("turnstile: release notice failed", "key", key, "backend", c.name, "err", err)
		}
	}()
}

// heldHere reports whether a lease won in this line still holds the lock.
func (ln *line) heldHere() bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.holding != nil
}

// subscribe starts the line's subscription to release notices, once per
// line. It returns the notice channel (nil if the store cannot notify)
// and whether this call subscribed.
func (ln *line) subscribe(c *Client, cfg *config) (<-chan struct{}, bool) {
	n, ok := c.backend.(driver.Notifier)
	if !ok || !cfg.notify {
		return nil, false
	}
	ln.mu.Lock()
	if ln.subbed {
		ch := ln.notice
		ln.mu.Unlock()
		return ch, false
	}
	ln.subbed = true
	ln.mu.Unlock()

	// The subscription serves the whole line, so it does not end with
	// the context of the waiter that happens to make it.
	sctx, cancel := context.WithCancel(context.Background())
	ch, stop, err := n.Released(sctx, ln.key)
	if err != nil {
		cancel()
		c.cfg.logger.Debug("turnstile: release notices unavailable, polling", "key", ln.key, "backend", c.name, "err", err)
		return nil, false
	}
	ln.mu.Lock()
	if ln.dead {
		ln.mu.Unlock()
		stop()
		cancel()
		return nil, false
	}
	ln.notice = ch
	ln.stopSub = func() { stop(); cancel() }
	ln.mu.Unlock()
	return ch, true
}

// leaseEnded wakes the line of l's key, if any: l was released or lost.
// It must run after l's context was cancelled.
func (c *Client) leaseEnded(l *Lease) {
	v, ok := c.lines.Load(l.key)
	if !ok {
		return
	}
	ln := v.(*line)
	ln.mu.Lock()
	if ln.holding == l {
		ln.holding = nil
	}
	noWake := ln.noWake
	ln.noWake = false
	ln.mu.Unlock()
	if noWake {
		return // handed over, or released aloud for the other processes to race
	}
	select {
	case ln.local <- struct{}{}:
	default:
	}
}

// busyMeter keeps the moving average of retries per waiting acquisition
// for WithQueueWhenBusy.
type busyMeter struct {
	mu    sync.Mutex
	mean  float64
	until time.Time // queue until then
}

// busyAlpha weighs the newest acquisition in the moving average.
const busyAlpha = 0.1

// busyHold is how long the Client queues once the average is exceeded.
const busyHold = time.Second

func (b *busyMeter) record(retries int, threshold float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mean += busyAlpha * (float64(retries) - b.mean)
	if b.mean > threshold {
		b.until = time.Now().Add(busyHold)
	}
}

func (b *busyMeter) queueing(threshold float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mean <= threshold {
		return false
	}
	if time.Now().Before(b.until) {
		return true
	}
	// The hold is over: let retrying acquisitions measure again, without
	// forgetting what was measured.
	return false
}
