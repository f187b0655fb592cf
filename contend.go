package turnstile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// How Acquire waits for a lock that is held.
//
// A waiter retries on three signals: a release notice from the store (when
// the backend is a driver.Notifier and notifications are on), a release by
// another lease of the same Client, and the Backoff's timer. The timer is
// the safety net for a lost notice and the only signal for stores that
// cannot notify; only its rounds count against the Backoff's retries, so a
// waiter woken by notices that keeps losing the race is not pushed out by
// them. After a notice the attempt waits a random moment (noticeJitter).
//
// Waiters of one Client for one key queue locally first (coalesce.go);
// a lock can come to a waiter from a releasing lease of its own Client
// without a race (handoff.go); and a store's own queue can replace the
// retries (queue.go, busy.go).

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
	// queueAfter > 0: after that many retries, stop and queue in the
	// store instead (WithQueueWhenBusy).
	queueAfter int
}

// retries is what the caller is told: attempts after the first.
func (k *contender) retries() int { return max(0, k.tries-1) }

// fail wraps err as the outcome of the acquisition.
func (k *contender) fail(err error) error { return k.c.wrap("acquire", k.key, err) }

// cancelled is the error for a context that ended the wait.
func (k *contender) cancelled(ctx context.Context) error {
	return k.fail(joinErrors(context.Cause(ctx), k.lastErr))
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
	token, ok, since, err := driver.AcquireSince(ctx, c.backend, k.key, k.owner, cfg.storeTTL(cfg.ttl))
	if !since.IsZero() {
		sent = min(sent, mono(since.Sub(epoch)))
	}
	switch {
	case ok && err == nil:
		l, err := c.newLease(ctx, k.key, k.owner, token, sent, cfg)
		if err == nil {
			return l, nil
		}
		k.owner = newOwner(cfg)
		if errors.Is(err, ErrClosed) {
			return nil, k.fail(err)
		}
		// Born expired: the round trip ate the whole validity.
		k.lastErr = fmt.Errorf("%w: acquisition took longer than the ttl %v allows", ErrNotAcquired, cfg.ttl)
	case err != nil:
		// The outcome is unknown: the lock may have been taken.
		c.abandon(cfg, k.key, k.owner)
		k.owner = newOwner(cfg)
		if ctx.Err() != nil {
			return nil, k.fail(joinErrors(context.Cause(ctx), err))
		}
		if errors.Is(err, ErrPermission) || errors.Is(err, ErrInvalidOption) {
			// The store refuses this user the lock, or this view's
			// settings (a semaphore's number of permits that differs
			// from its holders'): asking again gets the same answer
			// until someone changes the permissions or the settings.
			return nil, k.fail(err)
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
		err = joinErrors(ErrNotAcquired, err)
	}
	// The Backoff's retries are its timer rounds; attempts made on release
	// notices and wake-ups come on top and are not counted against it.
	if extra := k.tries - 1 - k.rounds; extra > 0 {
		return k.fail(fmt.Errorf("%w (after %d retries, and %d more attempts on release notices)", err, k.rounds, extra))
	}
	return k.fail(fmt.Errorf("%w (after %d retries)", err, k.rounds))
}

// signals are what wakes a waiter besides its timer.
type signals struct {
	notice <-chan struct{} // release notices from the store
	// line and w: the waiter heads line, the Client's local line for
	// the key (coalesce.go). It is woken by leases of this Client that
	// end, and may be handed the lock by one (handoff.go).
	line *line
	w    *waiter
}

// noticeJitter spreads the attempts that one release notice sets off:
// every process waiting for the key gets it, and each waits a random time
// below noticeJitter before its attempt. Attempting at once, the waiters'
// race would go to whichever the server told first or the scheduler ran
// first — the same few processes, time after time — and cost every loser
// a failed attempt at the same moment; spread, the first usually takes
// the lock before the others ask.
const noticeJitter = 200 * time.Microsecond

// contend retries until the lock is taken, the Backoff gives up, ctx is
// done or the Client is closed. If first is set it attempts at once
// (unless a lease of its line holds the lock), otherwise it waits for a
// signal first.
//
// A notice or local wake-up restarts the safety-net timer: while the lock
// changes hands and says so, there is nothing to poll for. Once that has
// happened the wait is also bounded by the Backoff's total (maxWait), as
// its rounds alone no longer are.
func (k *contender) contend(ctx context.Context, sig signals, first bool) (*Lease, error) {
	var local <-chan struct{}
	if sig.line != nil {
		local = sig.line.local
	}
	var budget <-chan time.Time
	if total, bounded := waitBudget(k.cfg.backoff); bounded && (sig.notice != nil || local != nil) {
		b := time.NewTimer(total)
		defer b.Stop()
		budget = b.C
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	attempt, noticed, armed, resets := first, false, false, 0
	for {
		if attempt {
			if l, err := k.step(ctx, sig, noticed); l != nil || err != nil {
				return l, err
			}
		}
		if !armed {
			delay, more := k.cfg.backoff.Delay(k.rounds)
			if queue := k.queueAfter > 0 && k.retries() >= k.queueAfter; !more || queue {
				// A lock handed over meanwhile is taken rather than left.
				if l, err := k.handedOnly(ctx, sig); l != nil || err != nil {
					return l, err
				}
				if queue {
					return nil, errQueueNow
				}
				return nil, k.giveUp()
			}
			timer.Reset(delay)
			armed = true
		}
		if sig.line != nil {
			sig.line.park(sig.w)
		}
		attempt, noticed = true, false
		select {
		case <-ctx.Done():
			return nil, k.cancelled(ctx)
		case <-k.c.closing:
			return nil, k.fail(ErrClosed)
		case <-budget:
			budget = nil
			if resets > 0 {
				if l, err := k.handedOnly(ctx, sig); l != nil || err != nil {
					return l, err
				}
				return nil, k.giveUp()
			}
			attempt = false // no signal came: the rounds decide
		case <-timer.C:
			armed = false
			k.rounds++
		case <-sig.notice:
			timer.Stop() // no stale value after Stop (Go 1.23 timers)
			armed = false
			resets++
			noticed = true
		case <-local:
			timer.Stop()
			armed = false
			resets++
		}
	}
}

// step is one attempt of a waiter woken by a signal (noticed: a release
// notice from the store). A line's head takes a lock handed to it, and
// asks the store only when no lease of its line holds the lock, after a
// random pause when the lock was released for other processes to race
// for. It returns the lease, or (nil, nil) to wait on, or an error that
// ends the wait.
func (k *contender) step(ctx context.Context, sig signals, noticed bool) (*Lease, error) {
	pause := noticed
	if sig.line != nil {
		g, handed, ask, race := sig.line.unpark(sig.w)
		if handed {
			if l, done, err := k.take(ctx, g); done {
				return l, err
			}
			// Handed over too late: given back, and asked for again.
			ask = true
		}
		if !ask {
			return nil, nil // a lease of the line holds the lock: its end wakes us
		}
		pause = pause || race
	}
	if pause {
		t := time.NewTimer(rand.N(noticeJitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, k.cancelled(ctx)
		case <-t.C:
		}
	}
	return k.try(ctx)
}

// handedOnly takes a lock handed to a line's head as it is about to stop
// waiting, without asking the store.
func (k *contender) handedOnly(ctx context.Context, sig signals) (*Lease, error) {
	if sig.line == nil {
		return nil, nil
	}
	g, handed, _, _ := sig.line.unpark(sig.w)
	if !handed {
		return nil, nil
	}
	l, _, err := k.take(ctx, g)
	return l, err
}

// take turns a lock handed over without the store into a lease. done
// reports that the wait is over (a lease or an error); otherwise the
// handoff came too late to be used (its TTL is gone), the lock is given
// back, and the caller goes on waiting.
func (k *contender) take(ctx context.Context, g handoff) (l *Lease, done bool, err error) {
	l, err = k.c.newLease(ctx, k.key, g.owner, g.token, g.sent, k.cfg)
	switch {
	case err == nil:
		return l, true, nil
	case errors.Is(err, ErrClosed):
		return nil, true, k.fail(err)
	}
	k.lastErr = fmt.Errorf("%w: the lock was handed over too late for the ttl %v", ErrNotAcquired, k.cfg.ttl)
	return nil, false, nil
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
			defer c.unsubscribe(stop)
			sig.notice = ch
			// A release between the failed attempt and the subscription
			// sent no notice we could see: look again now.
			return k.contend(ctx, sig, true)
		}
	}
	return k.contend(ctx, sig, false)
}
