package events

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events/internal/kafkaopt"
	"github.com/turnstilelock/turnstile/internal/storeurl"
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
	tls          *tls.Config    // WithTLS, WithTLSFiles
	sasl         sasl.Mechanism // WithSASLPlain, WithSASLScram
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
	return func(c *config) error { return kafkaopt.SetTopic(&c.topic, topic) }
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
	return func(c *config) error { return kafkaopt.AddClientOptions(&c.kgoOpts, opts) }
}

// WithRegisterer registers two counters with reg:
// turnstile_events_published_total (events Kafka acknowledged, by Observe
// or Publish) and turnstile_events_dropped_total (observed events that
// never reached Kafka). Default: no metrics.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(c *config) error { return kafkaopt.SetRegisterer(&c.reg, reg) }
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

// WithTLS makes the client NewKafka creates talk to the brokers over TLS
// with cfg: cfg.RootCAs are the authorities of the brokers' certificates
// (nil for the system's), cfg.Certificates a client certificate for
// brokers that want one (ssl.client.auth=required), cfg.ServerName the
// name the brokers' certificates carry (empty for the host dialled). The
// brokers are always verified: a cfg with InsecureSkipVerify is refused
// unless it verifies them itself (VerifyPeerCertificate or
// VerifyConnection). TLS 1.2 is the least version, unless cfg asks for a
// later one. Not with WithClient, whose client has its own settings.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) error {
		switch {
		case cfg == nil:
			return fmt.Errorf("%w: nil kafka TLS config", turnstile.ErrInvalidOption)
		case cfg.InsecureSkipVerify && cfg.VerifyPeerCertificate == nil && cfg.VerifyConnection == nil:
			return fmt.Errorf("%w: kafka TLS config with InsecureSkipVerify and no verification of its own: the brokers must be verified", turnstile.ErrInvalidOption)
		case c.tls != nil:
			return fmt.Errorf("%w: kafka TLS given twice", turnstile.ErrInvalidOption)
		}
		c.tls = cfg.Clone()
		if c.tls.MinVersion < tls.VersionTLS12 {
			c.tls.MinVersion = tls.VersionTLS12
		}
		return nil
	}
}

// WithTLSFiles is WithTLS with a configuration read from PEM files, as
// the ca_file, cert_file, key_file and server_name parameters of the
// lock stores' URLs say: caFile holds the authorities of the brokers'
// certificates ("" for the system's), certFile and keyFile a client
// certificate and its key (both or neither), serverName the name the
// brokers' certificates carry ("" for the host dialled). The files are
// read when NewKafka runs: a missing, unreadable or malformed one makes
// it fail with turnstile.ErrInvalidOption and an error naming the file.
func WithTLSFiles(caFile, certFile, keyFile, serverName string) Option {
	return func(c *config) error {
		var tl storeurl.TLS
		params := tl.Params(map[string]storeurl.Param{})
		for i, v := range []string{caFile, certFile, keyFile, serverName} {
			if v == "" {
				continue
			}
			name := storeurl.TLSParamNames[i]
			if err := params[name](v); err != nil {
				return fmt.Errorf("%w: kafka TLS: %s %q %v", turnstile.ErrInvalidOption, name, v, err)
			}
		}
		cfg, err := tl.Config()
		if err != nil {
			return fmt.Errorf("%w: kafka TLS: %v", turnstile.ErrInvalidOption, err)
		}
		return WithTLS(cfg)(c)
	}
}

// WithSASLPlain makes the client NewKafka creates authenticate with SASL
// PLAIN as user with password. PLAIN sends the password as it is: use it
// over TLS (WithTLS) only. Not with WithClient.
func WithSASLPlain(user, password string) Option {
	return func(c *config) error {
		if user == "" || password == "" {
			return fmt.Errorf("%w: kafka SASL PLAIN needs a user and a password", turnstile.ErrInvalidOption)
		}
		return setSASL(c, plain.Auth{User: user, Pass: password}.AsMechanism())
	}
}

// WithSASLScram makes the client NewKafka creates authenticate with SASL
// SCRAM as user with password; mechanism is "SCRAM-SHA-256" or
// "SCRAM-SHA-512". Not with WithClient.
func WithSASLScram(mechanism, user, password string) Option {
	return func(c *config) error {
		if user == "" || password == "" {
			return fmt.Errorf("%w: kafka SASL %s needs a user and a password", turnstile.ErrInvalidOption, mechanism)
		}
		a := scram.Auth{User: user, Pass: password}
		switch mechanism {
		case "SCRAM-SHA-256":
			return setSASL(c, a.AsSha256Mechanism())
		case "SCRAM-SHA-512":
			return setSASL(c, a.AsSha512Mechanism())
		}
		return fmt.Errorf("%w: kafka SASL mechanism %q, want SCRAM-SHA-256 or SCRAM-SHA-512", turnstile.ErrInvalidOption, mechanism)
	}
}

func setSASL(c *config, m sasl.Mechanism) error {
	if c.sasl != nil {
		return fmt.Errorf("%w: kafka SASL given twice (%s, then %s): give one mechanism", turnstile.ErrInvalidOption, c.sasl.Name(), m.Name())
	}
	c.sasl = m
	return nil
}

// security are the client options of WithTLS and the SASL options.
func (c *config) security() []kgo.Opt {
	var opts []kgo.Opt
	if c.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(c.tls))
	}
	if c.sasl != nil {
		opts = append(opts, kgo.SASL(c.sasl))
	}
	return opts
}
