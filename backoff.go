package turnstile

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff decides how long Acquire waits before retrying a lock that is
// held by someone else.
type Backoff interface {
	// Delay returns the wait before retry number attempt (0 for the wait
	// after the first failed try), or false when no retry is left.
	Delay(attempt int) (time.Duration, bool)
}

// Exponential is exponential backoff with full jitter: before
// retry n it sleeps a uniformly random duration in [0, min(Cap, Base·2^n)).
// Full jitter spreads competing waiters so that their retries do not
// arrive in lockstep.
type Exponential struct {
	Base time.Duration
	Cap  time.Duration
	// MaxRetries is how many retries follow the first attempt; a negative
	// value retries until the context is done.
	MaxRetries int
}

// Delay implements Backoff.
func (e Exponential) Delay(attempt int) (time.Duration, bool) {
	if e.MaxRetries >= 0 && attempt >= e.MaxRetries {
		return 0, false
	}
	ceiling := e.Cap
	if attempt < 62 {
		if d := e.Base << attempt; d > 0 && d < ceiling && d>>attempt == e.Base {
			ceiling = d
		}
	}
	if ceiling <= 0 {
		return 0, true
	}
	return rand.N(ceiling), true
}

// maxWait is the longest Acquire can wait in total: the sum of every
// retry's ceiling. Stores that queue waiters themselves wait this long in
// their queue. Unbounded when MaxRetries is negative.
func (e Exponential) maxWait() (time.Duration, bool) {
	if e.MaxRetries < 0 {
		return 0, false
	}
	var total time.Duration
	for attempt := range e.MaxRetries {
		ceiling := e.Cap
		if attempt < 62 {
			if d := e.Base << attempt; d > 0 && d < ceiling && d>>attempt == e.Base {
				ceiling = d
			}
		}
		total += ceiling
	}
	return total, true
}

func (e Exponential) validate() error {
	if e.Base <= 0 || e.Cap < e.Base {
		return fmt.Errorf("%w: exponential backoff needs 0 < base <= cap, got base %v cap %v", ErrInvalidOption, e.Base, e.Cap)
	}
	return nil
}

// NoRetry makes Acquire behave like TryAcquire: one attempt.
func NoRetry() Backoff { return noRetry{} }

type noRetry struct{}

func (noRetry) Delay(int) (time.Duration, bool) { return 0, false }

// Constant retries after the same pause every time, without jitter.
// Competing waiters that start together then retry together, in lockstep:
// it exists to show the thundering herd and for tests. Prefer
// Exponential.
type Constant struct {
	Interval time.Duration
	// MaxRetries is how many retries follow the first attempt; a negative
	// value retries until the context is done.
	MaxRetries int
}

// Delay implements Backoff.
func (c Constant) Delay(attempt int) (time.Duration, bool) {
	if c.MaxRetries >= 0 && attempt >= c.MaxRetries {
		return 0, false
	}
	return c.Interval, true
}

func (c Constant) maxWait() (time.Duration, bool) {
	if c.MaxRetries < 0 {
		return 0, false
	}
	return c.Interval * time.Duration(c.MaxRetries), true
}

func (c Constant) validate() error {
	if c.Interval <= 0 {
		return fmt.Errorf("%w: constant backoff needs a positive interval, got %v", ErrInvalidOption, c.Interval)
	}
	return nil
}

// waitBudget is the longest total wait b allows, if it says: the bound on
// every wait that does not count Backoff rounds — behind other waiters
// of this Client, in a store's queue, in an admission line, and on
// release notices (Exponential: the sum of its retries' ceilings).
func waitBudget(b Backoff) (time.Duration, bool) {
	if m, ok := b.(interface{ maxWait() (time.Duration, bool) }); ok {
		return m.maxWait()
	}
	return 0, false
}
