package postgres

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
)

// DefaultConns is the number of lock connections when WithConns is not
// given.
const DefaultConns = 4

// DefaultOpTimeout bounds one operation on a lock connection when
// WithOpTimeout is not given.
const DefaultOpTimeout = 5 * time.Second

// Option configures a Backend. An option whose value is out of range
// makes New, Dial and Open fail with turnstile.ErrInvalidOption.
type Option func(*config) error

type config struct {
	conns     int
	opTimeout time.Duration
}

func defaultConfig() config { return config{conns: DefaultConns, opTimeout: DefaultOpTimeout} }

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: postgres: nil option", turnstile.ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// WithConns sets how many connections hold the Backend's advisory locks,
// and so the most it opens. Keys are spread over them by hash; operations
// on keys of one connection run one at a time. Default DefaultConns (4).
// It must lie in [1, 1024].
func WithConns(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("%w: postgres: %d lock connections, want 1 to 1024", turnstile.ErrInvalidOption, n)
		}
		c.conns = n
		return nil
	}
}

// WithOpTimeout bounds one query on a lock connection, and the wait for a
// connection before it. It replaces the caller's context while the query
// runs, because cancelling a query closes its connection and so frees
// every advisory lock on it; a query that times out does close it. A
// connection attempt unanswered for a fifth of it (at most 1 s) gets
// another beside it, so that one lost to a network fault does not hold
// up the operations after the heal. Default DefaultOpTimeout (5s). It
// must be positive.
func WithOpTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: postgres: operation timeout %v is not positive", turnstile.ErrInvalidOption, d)
		}
		c.opTimeout = d
		return nil
	}
}
