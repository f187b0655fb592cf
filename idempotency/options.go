package idempotency

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
)

const (
	// DefaultRetention is how long a stored result is kept unless
	// WithRetention says otherwise.
	DefaultRetention = 24 * time.Hour
	// DefaultClaimTTL is how long an in-progress claim outlives a crashed
	// runner unless WithClaimTTL says otherwise.
	DefaultClaimTTL = 30 * time.Second
	// MinClaimTTL is the shortest claim TTL: the claim is renewed every
	// third of it, and each renewal is a round trip to the store.
	MinClaimTTL = 10 * time.Millisecond
	// MinRetention is the shortest retention (the stores keep
	// milliseconds).
	MinRetention = time.Millisecond
	// MaxKeyLen is the longest request key, in bytes.
	MaxKeyLen = turnstile.MaxKeyLen
)

// config is what the options set, shared by every store.
type config struct {
	retention time.Duration
	wait      time.Duration
	claimTTL  time.Duration
}

// Option changes a store's settings. Options are checked when the store is
// made: NewRedis and NewPostgres return the error, NewMemory hands it to
// every Do.
type Option func(*config) error

// WithRetention sets how long a stored result is kept: a duplicate within
// this time gets the result without running fn, after it the key runs
// again. Default 24 h (DefaultRetention); at least MinRetention.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d < MinRetention {
			return fmt.Errorf("%w: retention %v is below %v", turnstile.ErrInvalidOption, d, MinRetention)
		}
		c.retention = d
		return nil
	}
}

// WithWait makes a concurrent duplicate wait up to d for the first call to
// finish, then return its result (replayed=true), instead of returning
// ErrInProgress at once. If the first call fails, the waiting duplicate
// claims the key and runs fn itself. After d it returns ErrInProgress.
// Default 0: no wait. d must not be negative.
func WithWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: wait %v is negative", turnstile.ErrInvalidOption, d)
		}
		c.wait = d
		return nil
	}
}

// WithClaimTTL sets how long a claim on a key lasts without renewal: the
// running call renews it every third of d while fn runs, so it expires
// only when the runner crashes or is cut off from the store, and then
// frees the key after at most d. Default 30 s (DefaultClaimTTL); at least
// MinClaimTTL.
func WithClaimTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < MinClaimTTL {
			return fmt.Errorf("%w: claim ttl %v is below %v", turnstile.ErrInvalidOption, d, MinClaimTTL)
		}
		c.claimTTL = d
		return nil
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{retention: DefaultRetention, claimTTL: DefaultClaimTTL}
	for i, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: option %d is nil", turnstile.ErrInvalidOption, i)
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}
