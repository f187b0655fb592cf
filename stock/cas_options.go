package stock

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Defaults and limits of CAS.
const (
	// DefaultCASRetries is how many times Take tries again after losing a
	// compare-and-set.
	DefaultCASRetries = 3
	// DefaultCASBackoff is the pause ceiling before the first retry; it
	// doubles for each retry after it.
	DefaultCASBackoff = 10 * time.Millisecond
	// MaxCASRetries is the most retries WithRetries accepts.
	MaxCASRetries = 20

	// maxCASBackoff caps every pause: a row contended for longer than
	// that is better left to the caller's own retry.
	maxCASBackoff = time.Second
)

// CASOption configures a CAS.
type CASOption func(*casConfig) error

type casConfig struct {
	retries int
	backoff time.Duration
}

func defaultCASConfig() casConfig {
	return casConfig{retries: DefaultCASRetries, backoff: DefaultCASBackoff}
}

// WithRetries sets how many times Take reads again and retries after
// losing a compare-and-set, in [0, MaxCASRetries]; 0 makes one attempt.
// Default DefaultCASRetries (3).
func WithRetries(n int) CASOption {
	return func(c *casConfig) error {
		if n < 0 || n > MaxCASRetries {
			return fmt.Errorf("%w: %d CAS retries is outside [0, %d]", turnstile.ErrInvalidOption, n, MaxCASRetries)
		}
		c.retries = n
		return nil
	}
}

// WithBackoff sets the ceiling of the pause before the first retry, in
// (0, 1 s]; the ceiling doubles for each later retry (at most 1 s) and the
// pause is drawn uniformly below it (full jitter). Default
// DefaultCASBackoff (10 ms).
func WithBackoff(base time.Duration) CASOption {
	return func(c *casConfig) error {
		if base <= 0 || base > maxCASBackoff {
			return fmt.Errorf("%w: CAS backoff %v is outside (0, %v]", turnstile.ErrInvalidOption, base, maxCASBackoff)
		}
		c.backoff = base
		return nil
	}
}
