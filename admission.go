package turnstile

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Admission limits how often a key may be acquired, in front of the lock
// (SPEC S-15: one hot resource at 100,000 requests/s is served at, say,
// 1,000 acquisitions/s; the rest wait in line or are refused). Package
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

// admissionLine is the queue of one Client's over-limit callers for one
// key.
type admissionLine struct {
	mu      sync.Mutex
	waiters []chan struct{} // [0] is the head; closed when it becomes head
	dead    bool
}

// admitInLine waits in key's admission line: the head asks again when
// the limit said it may succeed, the others wait for their turn.
func (c *Client) admitInLine(ctx context.Context, key string, cfg *config, retry time.Duration) error {
	if budget, bounded := maxWaitOf(cfg.backoff); bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, budget, fmt.Errorf("%w: not admitted within %v", ErrRateLimited, budget))
		defer cancel()
	}
	var ln *admissionLine
	turn := make(chan struct{})
	for {
		v, _ := c.admissions.LoadOrStore(key, &admissionLine{})
		ln = v.(*admissionLine)
		ln.mu.Lock()
		if ln.dead {
			ln.mu.Unlock()
			continue
		}
		ln.waiters = append(ln.waiters, turn)
		if len(ln.waiters) == 1 {
			close(turn)
		}
		ln.mu.Unlock()
		break
	}
	defer func() {
		ln.mu.Lock()
		for i, w := range ln.waiters {
			if w == turn {
				ln.waiters = append(ln.waiters[:i], ln.waiters[i+1:]...)
				if i == 0 && len(ln.waiters) > 0 {
					close(ln.waiters[0])
				}
				break
			}
		}
		if len(ln.waiters) == 0 {
			ln.dead = true
			c.admissions.CompareAndDelete(key, ln)
		}
		ln.mu.Unlock()
	}()

	last := -1
	report := func() {
		if cfg.position == nil {
			return
		}
		ln.mu.Lock()
		pos := len(ln.waiters)
		for i, w := range ln.waiters {
			if w == turn {
				pos = i + 1
				break
			}
		}
		ln.mu.Unlock()
		if pos != last {
			last = pos
			cfg.position(pos)
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		report()
		select {
		case <-turn:
		case <-ctx.Done():
			return c.wrap("admit", key, context.Cause(ctx))
		case <-timer.C: // a place was freed: look at the position again
			timer.Reset(min(max(retry, time.Millisecond), 50*time.Millisecond))
			continue
		}
		// At the head: wait until the limit may let us in, and ask.
		timer.Reset(max(retry, 0))
		select {
		case <-ctx.Done():
			return c.wrap("admit", key, context.Cause(ctx))
		case <-timer.C:
		}
		ok, again, err := cfg.admission.Admit(ctx, key)
		if err != nil {
			return c.wrap("admit", key, err)
		}
		if ok {
			return nil
		}
		retry = again
	}
}
