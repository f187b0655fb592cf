package redis

import (
	"fmt"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
)

// DefaultFenceGrace is how long a key's fencing state outlives its lock.
const DefaultFenceGrace = 10 * time.Second

// maxFenceGrace keeps the fence TTL (lock TTL + grace) far from overflow and
// from keeping state for days.
const maxFenceGrace = 24 * time.Hour

// maxQuarantine bounds the restart quarantine: a day of refusing locks
// after every restart is already far more than any lease needs.
const maxQuarantine = 24 * time.Hour

type config struct {
	prefix     string
	grace      time.Duration
	quarantine time.Duration // 0: off
	wait       waitConfig    // WithWaitReplicas
	graceArg   string        // grace in script form (millis), set by apply
}

func defaultConfig() config {
	return config{grace: DefaultFenceGrace, graceArg: millis(DefaultFenceGrace)}
}

// An Option changes a setting of a Backend.
type Option func(*config) error

// WithPrefix puts prefix in front of every Redis key and channel the
// backend uses, so that several applications can share one Redis. Default
// "". It must not contain '{' or '}': the backend places the lock key in a
// hash tag of its own, and braces in the prefix would move the tag.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: redis key prefix %q must not contain '{' or '}'", turnstile.ErrInvalidOption, prefix)
		}
		if len(prefix) > turnstile.MaxKeyLen {
			return fmt.Errorf("%w: redis key prefix is %d bytes, longer than %d", turnstile.ErrInvalidOption, len(prefix), turnstile.MaxKeyLen)
		}
		c.prefix = prefix
		return nil
	}
}

// WithFenceGrace sets how long the last fencing token of a key is kept
// after its lock was released or expired. Default 10 s. Within the grace
// period a new token is derived from the stored one; after it, from the
// server clock alone, so the grace is how far the server clock may step
// back without tokens going backwards (see the package documentation). It
// must lie in [1 ms, 24 h].
func WithFenceGrace(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > maxFenceGrace {
			return fmt.Errorf("%w: fence grace %v is outside [1ms, %v]", turnstile.ErrInvalidOption, d, maxFenceGrace)
		}
		c.grace = d
		return nil
	}
}

// WithRestartQuarantine makes the server refuse every lock for d after its
// process started, so that a server that restarted without its data cannot
// grant a lock that another holder still holds in its lost data set
// ("delayed restart"). d must be at least the largest TTL any client of
// this server uses, and lie in [0, 24 h]. Default 0: off, because on a
// lone server it turns every start and restart into an outage of d;
// without it a holder whose lock was lost learns at its next renewal (at
// most TTL/3 later), another holder may enter meanwhile, and the fencing
// tokens still increase. Turn it on where a second holder is worse than
// the outage, and for members of a Redlock, where the other servers keep
// serving (package redlock does so by default). While the server refuses,
// Acquire returns an error matching ErrQuarantined.
func WithRestartQuarantine(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > maxQuarantine {
			return fmt.Errorf("%w: restart quarantine %v is outside [0, %v]", turnstile.ErrInvalidOption, d, maxQuarantine)
		}
		c.quarantine = d
		return nil
	}
}

// CheckOptions reports the first option that New, NewGoRedis or Dial
// would refuse, without a client: for callers that build backends later
// and want bad settings reported first (package redlock checks its URL
// this way before it dials anything).
func CheckOptions(opts ...Option) error {
	cfg := defaultConfig()
	return cfg.apply(opts)
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil redis option", turnstile.ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	c.graceArg = millis(c.grace)
	return nil
}
