package mysql

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
)

// DefaultConns is how many connections a Backend pins for its locks when
// WithConns is not given.
const DefaultConns = 4

// DefaultDialTimeout bounds connecting when a URL sets no dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// sweepEvery is how often the Backend releases locks whose TTL passed.
const sweepEvery = 25 * time.Millisecond

// statementTimeout bounds a statement whose context has no deadline.
const statementTimeout = 30 * time.Second

// statementFloor is the least time a statement is given, whatever its
// caller's deadline (statementContext).
const statementFloor = 5 * time.Second

// unlockTimeout bounds freeing a user lock.
const unlockTimeout = 5 * time.Second

// Option configures a Backend.
type Option func(*config) error

type config struct {
	conns int
}

func defaultConfig() config { return config{conns: DefaultConns} }

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// WithConns sets how many connections the Backend pins to hold its locks:
// every lock of the Backend lives on one of them, so this bounds the
// Backend's connections however many locks it holds. Operations on one
// connection run one at a time. Default DefaultConns (4).
func WithConns(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("%w: conns %d not in [1, 1024]", turnstile.ErrInvalidOption, n)
		}
		c.conns = n
		return nil
	}
}
