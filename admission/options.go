package admission

import (
	"fmt"
	"strings"

	"github.com/turnstilelock/turnstile"
)

// DefaultMaxKeys is how many keys a process tracks locally unless
// WithMaxKeys says otherwise.
const DefaultMaxKeys = 10_000

// Option changes how NewRedis or NewLocal builds an admission.
type Option func(*config) error

type config struct {
	prefix    string
	maxKeys   int
	preFilter bool
	redisOnly string // the name of the last Redis-only option given
}

// WithPrefix puts prefix in front of every Redis key, like the redis
// backend's option of the same name, so that a key's limit sits next to
// its lock: the limit of key K is kept in prefix + "{K}:admission". Redis
// only. Default: no prefix.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: redis key prefix %q must not contain '{' or '}'", turnstile.ErrInvalidOption, prefix)
		}
		if len(prefix) > turnstile.MaxKeyLen {
			return fmt.Errorf("%w: redis key prefix is %d bytes, longer than %d", turnstile.ErrInvalidOption, len(prefix), turnstile.MaxKeyLen)
		}
		c.prefix, c.redisOnly = prefix, "WithPrefix"
		return nil
	}
}

// WithMaxKeys bounds how many keys are tracked in this process: a Local's
// limiters, or a Redis admission's pre-filter. Past n keys, the least
// recently asked key is forgotten. Default DefaultMaxKeys; each key costs
// about 200 bytes plus its length.
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max keys %d must be at least 1", turnstile.ErrInvalidOption, n)
		}
		c.maxKeys = n
		return nil
	}
}

// WithoutPreFilter makes every Admit of a Redis admission ask Redis, even
// when this process alone has already asked for the key more often than
// the limit allows. Redis only. Default: the pre-filter is on.
func WithoutPreFilter() Option {
	return func(c *config) error {
		c.preFilter, c.redisOnly = false, "WithoutPreFilter"
		return nil
	}
}

func newConfig(opts []Option) (*config, error) {
	c := &config{maxKeys: DefaultMaxKeys, preFilter: true}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil admission option", turnstile.ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}
