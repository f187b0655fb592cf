package turnstile

import (
	"context"
	"fmt"
	"time"
)

// Admission limits how often a key may be acquired, in front of the lock
// (for example, one hot resource asked for 100,000 times a second is
// served at 1,000 acquisitions/s; the rest wait in line or are refused). Package
// turnstile/admission has one shared by every instance through Redis.
type Admission interface {
	// Admit asks to acquire key once. ok=false means key is over its
	// limit; retryAfter then says when asking again may succeed. An error
	// means the limit could not be checked; the acquisition fails with it.
	Admit(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

// OverLimit says what an acquisition does when its key is over the
// Admission's limit.
type OverLimit uint8

const (
	// RejectOverLimit fails the acquisition at once with ErrRateLimited.
	RejectOverLimit OverLimit = iota + 1
	// QueueOverLimit waits in a first-come-first-served line (per Client
	// and key) until admitted, as long as ctx and the Backoff's total wait
	// allow; WithQueuePosition reports the place in that line.
	QueueOverLimit
)

// WithAdmission puts a per-key rate limit in front of every acquisition
// (Acquire, TryAcquire, Do): each call is admitted once, before its
// first attempt; over the limit, it is refused or queued as onLimit
// says. Default: no limit.
func WithAdmission(a Admission, onLimit OverLimit) Option {
	return func(c *config) error {
		if a == nil {
			return fmt.Errorf("%w: nil admission", ErrInvalidOption)
		}
		if onLimit != RejectOverLimit && onLimit != QueueOverLimit {
			return fmt.Errorf("%w: unknown over-limit policy %d", ErrInvalidOption, onLimit)
		}
		c.admission, c.overLimit = a, onLimit
		return nil
	}
}

// admit runs the Admission of cfg for one acquisition of key.
func (c *Client) admit(ctx context.Context, key string, cfg *config) error {
	if cfg.overLimit == QueueOverLimit && c.admissions.busy(key) {
		// Callers of this Client already wait for key: behind them.
		return c.admitInLine(ctx, key, cfg, 0)
	}
	ok, retry, err := cfg.admission.Admit(ctx, key)
	if err != nil {
		return c.wrap("admit", key, err)
	}
	if ok {
		return nil
	}
	if cfg.overLimit == RejectOverLimit {
		return c.wrap("admit", key, fmt.Errorf("%w: retry after %v", ErrRateLimited, retry))
	}
	return c.admitInLine(ctx, key, cfg, retry)
}

// BatchAdmission is an Admission that can admit several acquisitions of
// a key at once. A line of waiting callers then asks once for its front,
// so it keeps arrival order without being held to one store round trip
// per admission.
type BatchAdmission interface {
	Admission
	// AdmitN asks to acquire key up to n times (n ≥ 1). It returns how
	// many it admits, 0 to n; with 0, retryAfter says when asking again
	// may succeed.
	AdmitN(ctx context.Context, key string, n int) (admitted int, retryAfter time.Duration, err error)
}

// maxAdmitBatch bounds one AdmitN of a line.
const maxAdmitBatch = 64

// admissionLine is the queue of one Client's over-limit callers for one
// key. Its head asks the Admission, for itself and, with a
// BatchAdmission, for the callers behind it; the others wait.
type admissionLine struct {
	fifo[*admitWaiter]
}

func newAdmissionLine() *admissionLine { return &admissionLine{} }

type admitWaiter struct {
	seat
	admitted chan struct{} // closed when the head admitted it
}

// admitInLine waits in key's admission line, first come first served:
// the head asks when the limit said it may succeed — for the callers at
// the front, if the Admission can admit several at once — and the others
// wait until the head admits them or they become the head.
func (c *Client) admitInLine(ctx context.Context, key string, cfg *config, retry time.Duration) error {
	if budget, bounded := waitBudget(cfg.backoff); bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, budget, fmt.Errorf("%w: not admitted within %v", ErrRateLimited, budget))
		defer cancel()
	}
	w := &admitWaiter{seat: newSeat(), admitted: make(chan struct{})}
	ln := c.admissions.join(key, w, newAdmissionLine)
	last := -1
	report := func() {
		if cfg.position == nil {
			return
		}
		ln.mu.Lock()
		pos := ln.position(w)
		ln.mu.Unlock()
		if pos > 0 && pos != last {
			last = pos
			cfg.position(pos)
		}
	}
	leave := func() {
		ln.mu.Lock()
		c.admissions.remove(ln, w, nil)
		ln.mu.Unlock()
	}
	batch, _ := cfg.admission.(BatchAdmission)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		report()
		// Behind others: wait to be admitted or to become the head, and
		// look at the position again now and then.
		timer.Reset(50 * time.Millisecond)
		select {
		case <-w.admitted:
			return nil
		case <-w.turn:
			select {
			case <-w.admitted: // admitted by the head before us
				return nil
			default:
			}
		case <-ctx.Done():
			leave()
			select {
			case <-w.admitted: // admitted just now: take it
				return nil
			default:
			}
			return c.wrap("admit", key, context.Cause(ctx))
		case <-timer.C:
			continue
		}
		// The head: wait until the limit may let the line in, and ask.
		timer.Reset(max(retry, 0))
		select {
		case <-ctx.Done():
			leave()
			return c.wrap("admit", key, context.Cause(ctx))
		case <-timer.C:
		}
		var n int
		var err error
		if batch != nil {
			ln.mu.Lock()
			want := min(len(ln.waiters), maxAdmitBatch)
			ln.mu.Unlock()
			n, retry, err = batch.AdmitN(ctx, key, want)
		} else {
			var ok bool
			ok, retry, err = cfg.admission.Admit(ctx, key)
			if ok {
				n = 1
			}
		}
		if err != nil {
			leave()
			return c.wrap("admit", key, err)
		}
		if n == 0 {
			continue
		}
		// Admit the first n of the line, in order: the head and the n−1
		// behind it (fewer if some left meanwhile).
		ln.mu.Lock()
		granted := ln.waiters[:min(n, len(ln.waiters))]
		granted = append([]*admitWaiter(nil), granted...)
		for _, g := range granted {
			if g != w {
				close(g.admitted) // before remove makes it the head
			}
		}
		for _, g := range granted {
			c.admissions.remove(ln, g, nil)
		}
		ln.mu.Unlock()
		return nil
	}
}
