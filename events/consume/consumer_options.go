package consume

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/internal/kafkaopt"
)

// DefaultMaxKeys is how many lock keys a Consumer keeps the position of
// in memory unless WithMaxKeys says otherwise.
const DefaultMaxKeys = 65536

// An Option configures New.
type Option func(*config) error

type config struct {
	topic    string
	kgoOpts  []kgo.Opt
	maxKeys  int
	attempts int
	wait     time.Duration
	onError  func(error)
	reg      prometheus.Registerer
}

func defaults() config {
	return config{
		topic:    events.Topic,
		maxKeys:  DefaultMaxKeys,
		attempts: 1,
		onError: func(err error) {
			slog.Default().Error("turnstile/events/consume: " + err.Error())
		},
	}
}

// WithTopic sets the topic the consumer reads. Default events.Topic
// ("lock-events").
func WithTopic(topic string) Option {
	return func(c *config) error { return kafkaopt.SetTopic(&c.topic, topic) }
}

// WithClientOptions adds franz-go options to the client New creates:
// TLS (kgo.DialTLSConfig), SASL (kgo.SASL), a client id, where a group
// without committed offsets starts (kgo.ConsumeResetOffset; the default
// is the start of each partition), and so on. They are applied after the
// consumer's own. Do not give kgo.OnPartitionsRevoked or
// kgo.OnPartitionsLost, which the consumer uses to forget the keys of
// partitions it no longer reads, nor options that change what it reads
// or how it commits (kgo.ConsumeTopics, kgo.ConsumerGroup, the
// autocommit options; use WithTopic and New's group). Default: none.
func WithClientOptions(opts ...kgo.Opt) Option {
	return func(c *config) error { return kafkaopt.AddClientOptions(&c.kgoOpts, opts) }
}

// WithMaxKeys sets how many lock keys the consumer keeps the position of
// in memory, n at least 1: about half a kilobyte each, plus the key. When
// an event comes for a key beyond that, the least recently seen key is
// forgotten; when an event comes for a key the consumer does not hold
// (forgotten, never seen, or seen before a restart or a rebalance), it
// asks the application's LastApplied first. Default DefaultMaxKeys
// (65,536).
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: consumer max keys %d, want at least 1", turnstile.ErrInvalidOption, n)
		}
		c.maxKeys = n
		return nil
	}
}

// WithRetry makes Run call the handler (and LastApplied) up to attempts
// times for one event, waiting wait between two attempts, before it
// gives up and stops; attempts is 1 to 1,000,000, wait at least 0.
// Default: 1 attempt, so that the first error stops Run.
func WithRetry(attempts int, wait time.Duration) Option {
	return func(c *config) error {
		if attempts < 1 || attempts > 1_000_000 {
			return fmt.Errorf("%w: consumer retry attempts %d, want 1 to 1000000", turnstile.ErrInvalidOption, attempts)
		}
		if wait < 0 {
			return fmt.Errorf("%w: negative consumer retry wait %v", turnstile.ErrInvalidOption, wait)
		}
		c.attempts, c.wait = attempts, wait
		return nil
	}
}

// WithErrorHandler sets the function told of the errors Run does not
// stop for: a poison record (a *PoisonError), a failed offset commit, a
// failed fetch. It is called from Run's goroutine, one error at a time,
// and should return quickly. Default: each is logged with slog.Default
// at error level.
func WithErrorHandler(f func(error)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil error handler", turnstile.ErrInvalidOption)
		}
		c.onError = f
		return nil
	}
}

// WithRegisterer registers with reg the counter
// turnstile_events_consumed_total, with the label result: "applied",
// "duplicate", "stale" or "poison" (see Stats). Default: no metrics.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(c *config) error { return kafkaopt.SetRegisterer(&c.reg, reg) }
}
