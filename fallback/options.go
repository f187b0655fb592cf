package fallback

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Defaults.
const (
	// DefaultTripAfter is how many consecutive store errors of the primary
	// open the breaker.
	DefaultTripAfter = 5

	// DefaultOpenTimeout is how long the breaker stays open before it lets
	// one acquisition probe the primary again.
	DefaultOpenTimeout = 5 * time.Second

	// DefaultGrace is how long a store that has just become the one in use
	// refuses new locks after a switch: the default lease TTL (30 s) plus
	// its drift allowance (1 % + 2 ms), rounded up to 31 s. It must be at
	// least the largest TTL any client of the pair uses; Acquire refuses
	// longer TTLs.
	DefaultGrace = 31 * time.Second
)

type config struct {
	tripAfter   uint32
	openTimeout time.Duration
	grace       time.Duration
	logger      *slog.Logger
	onChange    func(from, to State)
}

func defaultConfig() config {
	return config{
		tripAfter:   DefaultTripAfter,
		openTimeout: DefaultOpenTimeout,
		grace:       DefaultGrace,
		logger:      slog.New(slog.DiscardHandler),
	}
}

// An Option changes a setting of a Backend.
type Option func(*config) error

// WithTripAfter sets how many consecutive store errors of the primary open
// the breaker. "Not acquired" and "not held" answers are successes: the
// store answered. Default 5 (DefaultTripAfter); at least 1.
func WithTripAfter(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1<<20 {
			return fmt.Errorf("%w: fallback trip threshold %d is outside [1, 2^20]", turnstile.ErrInvalidOption, n)
		}
		c.tripAfter = uint32(n)
		return nil
	}
}

// WithOpenTimeout sets how long the breaker stays open before one
// acquisition probes the primary. Default 5 s (DefaultOpenTimeout); it
// must lie in [1 ms, 1 h].
func WithOpenTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > time.Hour {
			return fmt.Errorf("%w: fallback open timeout %v is outside [1ms, 1h]", turnstile.ErrInvalidOption, d)
		}
		c.openTimeout = d
		return nil
	}
}

// WithGrace sets how long a store refuses new locks after the Backend
// switched to it, so that every lock the other store granted before the
// switch has expired. It must be at least the largest TTL in use plus its
// drift allowance; Acquire refuses TTLs longer than grace. With several
// processes it must also cover how far apart their breakers switch (see
// the package documentation). Default 31 s (DefaultGrace); it must lie in
// [1 ms, 24 h].
func WithGrace(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > 24*time.Hour {
			return fmt.Errorf("%w: fallback grace %v is outside [1ms, 24h]", turnstile.ErrInvalidOption, d)
		}
		c.grace = d
		return nil
	}
}

// WithLogger logs every breaker state change and store switch at level
// Warn (opening) or Info (others). Default: no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil fallback logger", turnstile.ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// WithOnStateChange calls f at every breaker state change, for metrics.
// f runs synchronously while the breaker is locked: it must return quickly
// and must not call the Backend. Default: none.
func WithOnStateChange(f func(from, to State)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil fallback state-change callback", turnstile.ErrInvalidOption)
		}
		c.onChange = f
		return nil
	}
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil fallback option", turnstile.ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}
