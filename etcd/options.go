package etcd

import (
	"errors"
	"strings"
)

// DefaultPrefix is where locks live unless WithPrefix says otherwise.
const DefaultPrefix = "/turnstile/"

type config struct {
	prefix string
}

func defaultConfig() config { return config{prefix: DefaultPrefix} }

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// Option configures a Backend.
type Option func(*config) error

// WithPrefix puts locks under prefix+"locks/" and waiters under
// prefix+"queue/". Default "/turnstile/". A prefix that does not end in
// "/" gets one.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if prefix == "" {
			return errors.New("etcd: empty prefix")
		}
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		c.prefix = prefix
		return nil
	}
}
