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
		err = errors.Join(ErrNotAcquired, err)
	}
	return k.fail(fmt.Errorf("%w (after %d retries)", err, k.retries()))
}

// signals are what wakes a waiter besides its timer.
type signals struct {
	notice <-chan struct{} // release notices from the store
	local  <-chan struct{} // releases by this Client (local line only)
	// heldHere reports whether the lock is held by a lease of this
	// Client; notices are set aside meanwhile (local line only). noticed
	// says a notice is what woke the waiter.
	heldHere func(noticed bool) bool
	// slot takes handoffs from a releasing lease of this Client (local
	// line only, driver.HandOff).
	slot *handoffSlot
}

// noticeJitter spreads the attempts that one release notice sets off:
// every process waiting for the key gets it, and each waits a random time
// below noticeJitter before its attempt. Attempting at once, the waiters'
// race would go to whichever the server told first or the scheduler ran
// first — the same few processes, time after time — and cost every loser
// a failed attempt at the same moment; spread, the first usually takes
// the lock before the others ask.
const noticeJitter = 200 * time.Microsecond

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
	if total, bounded := waitBudget(k.cfg.backoff); bounded && (sig.notice != nil || sig.local != nil) {
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
			queue := k.queueAfter > 0 && k.retries() >= k.queueAfter
			if !more || queue {
				if sig.slot != nil && sig.slot.close() {
					if l, err := k.receive(ctx, sig.slot); l != nil || err != nil {
						return l, err
					}
				}
				if queue {
					return nil, errQueueNow
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
		noticed := false
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
			noticed = true
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
		if sig.heldHere != nil && sig.heldHere(noticed) {
			continue // held by a lease of ours: its release wakes us locally
		}
		if noticed {
			t := time.NewTimer(rand.N(noticeJitter))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, k.cancelled(ctx)
			case <-t.C:
			}
		}
		if l, err := k.try(ctx); l != nil || err != nil {
			return l, err
		}
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
