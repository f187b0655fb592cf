package events

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
)

// DefaultBuffer is how many observed events may wait for Kafka's
// acknowledgement before further ones are dropped, unless WithBuffer says
// otherwise.
const DefaultBuffer = 65536

// An Option configures NewKafka.
type Option func(*config) error

type config struct {
	buffer       int
	topic        string
	client       *kgo.Client
	kgoOpts      []kgo.Opt
	reg          prometheus.Registerer
	closeTimeout time.Duration
}

func defaults() config {
	return config{buffer: DefaultBuffer, topic: Topic, closeTimeout: 5 * time.Second}
}

// WithBuffer sets how many observed events may wait for Kafka's
// acknowledgement at once; an event observed while n are waiting is
// dropped and counted (Dropped). n must be at least 1. Default
// DefaultBuffer (65,536). Events given to Publish do not count against it.
func WithBuffer(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: events buffer %d, want at least 1", turnstile.ErrInvalidOption, n)
		}
		c.buffer = n
		return nil
	}
}

// WithTopic sets the Kafka topic. Default Topic ("lock-events"). The
// topic must exist, or the brokers must create topics on first use.
func WithTopic(topic string) Option {
	return func(c *config) error {
		if topic == "" {
			return fmt.Errorf("%w: empty topic", turnstile.ErrInvalidOption)
		}
		c.topic = topic
		return nil
	}
}

// WithClient makes the publisher produce through cl instead of a client
// of its own; NewKafka's seeds must then be empty. Close flushes cl but
// does not close it. cl's own settings apply: for per-key order across
// retries keep its idempotent producer (the franz-go default) and its
// key-hashing partitioner. Default: NewKafka creates a client.
func WithClient(cl *kgo.Client) Option {
	return func(c *config) error {
		if cl == nil {
			return fmt.Errorf("%w: nil kafka client", turnstile.ErrInvalidOption)
		}
		c.client = cl
		return nil
	}
}

// WithClientOptions adds franz-go options (TLS, SASL, client id, ...) to
// the client NewKafka creates; they are applied after the publisher's own
// (idempotent producer, acks from all in-sync replicas, default topic), so
// they can override them. Default: none.
func WithClientOptions(opts ...kgo.Opt) Option {
	return func(c *config) error {
		for i, o := range opts {
			if o == nil {
				return fmt.Errorf("%w: nil kafka client option %d", turnstile.ErrInvalidOption, i)
			}
		}
		c.kgoOpts = append(c.kgoOpts, opts...)
		return nil
	}
}

// WithRegisterer registers two counters with reg:
// turnstile_events_published_total (events Kafka acknowledged, by Observe
// or Publish) and turnstile_events_dropped_total (observed events that
// never reached Kafka). Default: no metrics.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(c *config) error {
		if reg == nil {
			return fmt.Errorf("%w: nil prometheus registerer", turnstile.ErrInvalidOption)
		}
		c.reg = reg
		return nil
	}
}

// WithCloseTimeout sets how long Close waits for buffered events to be
// acknowledged before it drops them. Default 5 s; 0 drops them at once.
func WithCloseTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative close timeout %v", turnstile.ErrInvalidOption, d)
		}
		c.closeTimeout = d
		return nil
	}
}
