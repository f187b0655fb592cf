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
	// the drift allowance and the time a process may trust one look at
	// the pair's state (see MaxTTL), rounded up to 31 s. Every process of
	// a pair must use the same grace, and it must cover the largest TTL
	// any of them uses; Acquire refuses longer TTLs.
	DefaultGrace = 31 * time.Second
)

// MaxTTL is the longest lease TTL a pair with switch grace grace takes:
// grace minus 2 % and 2 ms for the drift of the clocks that measure it
// (the process's and the secondary's), minus the least time a process
// may act on one look at the pair's state (a tenth of the grace, at most
// 100 ms). For the default 31 s grace it is 30.278 s. Zero if grace is
// too short for any TTL.
func MaxTTL(grace time.Duration) time.Duration {
	return max(0, grace-drift(grace)-lookRoom(grace))
}

// drift is the part of a grace that clock drift may eat: 1 % for each
// of the two clocks that measure it, and 2 ms.
func drift(grace time.Duration) time.Duration { return grace/50 + 2*time.Millisecond }

// lookRoom is the least time a process may act on one look at the pair's
// state before it must look again: MaxTTL leaves at least this much.
func lookRoom(grace time.Duration) time.Duration { return min(grace/10, 100*time.Millisecond) }

// trust is how long after the start of a look at the pair's state a
// process may start to grant or renew a lease of ttl on what it saw:
// whatever another process writes to the state after the look, the
// store switched to grants nothing for a grace, by when every lease this
// process granted or renewed on that look has ended.
func trust(grace, ttl time.Duration) time.Duration { return grace - ttl - drift(grace) }

type config struct {
	tripAfter   uint32
	openTimeout time.Duration
	grace       time.Duration
	pair        string // the pair's name: its state's key in the secondary is stateKeyPrefix + pair
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

// WithGrace sets how long a store refuses new locks after the pair
// switched to it, so that every lease the other store granted or renewed
// before the switch has ended. Every process of the pair must use the
// same grace; Acquire refuses TTLs above MaxTTL(grace). Default 31 s
// (DefaultGrace); it must lie in [1 ms, 24 h].
func WithGrace(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > 24*time.Hour {
			return fmt.Errorf("%w: fallback grace %v is outside [1ms, 24h]", turnstile.ErrInvalidOption, d)
		}
		c.grace = d
		return nil
	}
}

// WithPair names the pair, for a secondary that several pairs share:
// the pair keeps its state (which store serves) in the secondary under
// the key "turnstile:fallback:" + name, or "turnstile:fallback" without
// a name. Every process of one pair must give the same name (or none),
// and two pairs with distinct primaries over one secondary distinct
// ones: pairs that share the key switch stores together. name is 1 to
// 64 letters, digits, '.', '_' or '-'.
func WithPair(name string) Option {
	return func(c *config) error {
		if err := checkPairName(name); err != nil {
			return fmt.Errorf("%w: %w", turnstile.ErrInvalidOption, err)
		}
		c.pair = name
		return nil
	}
}

// checkPairName says what is wrong with a pair name, if anything.
func checkPairName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("fallback pair name %q: want 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("fallback pair name %q: want only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// WithLogger logs every breaker state change and every change of the
// pair's state at level Warn (the breaker opening, a switch to the
// secondary, a state that cannot be read) or Info (others). Default: no
// logging.
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
