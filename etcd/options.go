package etcd

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultPrefix is where locks live unless WithPrefix says otherwise.
const DefaultPrefix = "/turnstile/"

type config struct {
	prefix string
	batch  int
}

func defaultConfig() config { return config{prefix: DefaultPrefix, batch: DefaultBatch} }

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

// maxBatch bounds WithBatch: etcd's --max-txn-ops would have to be
// raised above its default of 128 for more.
const maxBatch = 1024

// WithBatch sets how many plain-lock writes of concurrent callers one
// transaction carries at most (see batch.go); 1 sends every write as a
// transaction of its own. Default DefaultBatch. A cluster whose
// --max-txn-ops is below n + 4 refuses the larger transactions, and the
// backend then halves its batches until they fit.
func WithBatch(n int) Option {
	return func(c *config) error {
		if n < 1 || n > maxBatch {
			return fmt.Errorf("etcd: batch %d out of range: want 1 to %d (1 turns batching off)", n, maxBatch)
		}
		c.batch = n
		return nil
	}
}
