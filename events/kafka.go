package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events/internal/kafkaopt"
)

// A Publisher sends events and returns once the broker acknowledged every
// one of them, or with an error; after an error some of them may have
// been delivered. *Kafka is one; package outbox's Relay uses one.
type Publisher interface {
	Publish(ctx context.Context, evs ...Event) error
}

// Kafka publishes lock events to a Kafka topic, one record per event with
// the lock key as the record key. It is a turnstile.Observer (Observe
// never blocks; see the package doc for what happens when Kafka is down)
// and a Publisher (Publish waits for the acknowledgement).
type Kafka struct {
	cl    *kgo.Client
	own   bool       // Close closes cl
	conns *connWatch // of a client NewKafka created; nil for WithClient's
	topic string
	limit int64

	closeTimeout time.Duration
	ctx          context.Context // of observed records; Close cancels it
	cancel       context.CancelFunc

	// mu makes Close wait for Observe calls under way, so that none hands
	// a record to the client after Close flushed it.
	mu     sync.RWMutex
	closed atomic.Bool

	queued    atomic.Int64   // observed events not yet acknowledged or failed
	pending   sync.WaitGroup // the same, for Close to wait on
	dropped   atomic.Uint64  // observed events that never reached Kafka
	published atomic.Uint64  // events Kafka acknowledged
}

var _ turnstile.Observer = (*Kafka)(nil)
var _ Publisher = (*Kafka)(nil)

// publishRoom is how many records Publish may buffer beyond the observed
// ones in a client NewKafka creates, so that a full observer buffer does
// not make Publish wait for room.
const publishRoom = 10000

// NewKafka returns a publisher producing to the brokers at seeds
// ("host:port"), or through the client given by WithClient. It does not
// dial: an unreachable cluster shows as dropped events and Publish
// errors, never as a blocked lock.
func NewKafka(seeds []string, opts ...Option) (*Kafka, error) {
	cfg := defaults()
	if err := kafkaopt.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	for _, s := range seeds {
		if s == "" {
			return nil, fmt.Errorf("%w: empty kafka seed address", turnstile.ErrInvalidOption)
		}
	}
	k := &Kafka{topic: cfg.topic, limit: int64(cfg.buffer), closeTimeout: cfg.closeTimeout}
	switch {
	case cfg.client != nil && len(seeds) > 0:
		return nil, fmt.Errorf("%w: both seeds and WithClient given", turnstile.ErrInvalidOption)
	case cfg.client != nil && len(cfg.kgoOpts) > 0:
		return nil, fmt.Errorf("%w: WithClientOptions given with WithClient", turnstile.ErrInvalidOption)
	case cfg.client != nil && (cfg.tls != nil || cfg.sasl != nil):
		return nil, fmt.Errorf("%w: TLS or SASL options given with WithClient: set them on that client", turnstile.ErrInvalidOption)
	case cfg.client != nil:
		k.cl = cfg.client
	case len(seeds) == 0:
		return nil, fmt.Errorf("%w: no kafka seed addresses", turnstile.ErrInvalidOption)
	default:
		kopts := append([]kgo.Opt{
			kgo.SeedBrokers(seeds...),
			kgo.DefaultProduceTopic(cfg.topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence needs it; also the default
			kgo.MaxBufferedRecords(cfg.buffer + publishRoom),
		}, cfg.security()...)
		k.conns = &connWatch{tls: cfg.tls != nil, sasl: cfg.sasl != nil}
		kopts = append(kopts, kgo.WithHooks(k.conns))
		kopts = append(kopts, cfg.kgoOpts...)
		cl, err := kgo.NewClient(kopts...)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka client: %w", turnstile.ErrInvalidOption, err)
		}
		k.cl, k.own = cl, true
	}
	if cfg.reg != nil {
		if err := k.register(cfg.reg); err != nil {
			if k.own {
				k.cl.Close()
			}
			return nil, err
		}
	}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	return k, nil
}

func (k *Kafka) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "turnstile_events_published_total",
			Help: "Lock events the Kafka brokers acknowledged.",
		}, func() float64 { return float64(k.published.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "turnstile_events_dropped_total",
			Help: "Observed lock events that never reached Kafka: buffer full, delivery failed or publisher closed.",
		}, func() float64 { return float64(k.dropped.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("turnstile/events: register metrics: %w", err)
		}
	}
	return nil
}

// Observe queues the lock event e for Kafka and returns at once. Events
// FromLock does not convert are ignored. When the buffer is full or the
// publisher is closed the event is dropped and counted (Dropped). The
// events of one key reach the topic in the order Observe was called for
// them, less the dropped ones.
func (k *Kafka) Observe(e turnstile.Event) {
	if _, ok := lockTypes[e.Type]; !ok {
		return
	}
	if k.closed.Load() {
		k.dropped.Add(1)
		return
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed.Load() {
		k.dropped.Add(1)
		return
	}
	if k.queued.Add(1) > k.limit {
		k.queued.Add(-1)
		k.dropped.Add(1)
		return
	}
	ev, _ := FromLock(e)
	rec, err := k.record(ev)
	if err != nil {
		k.queued.Add(-1)
		k.dropped.Add(1)
		return
	}
	k.pending.Add(1)
	// TryProduce fails rather than waits when the client's buffer is full;
	// this publisher's own limit keeps observed events below that size.
	k.cl.TryProduce(k.ctx, rec, k.observed)
}

// observed is the promise of an observed record.
func (k *Kafka) observed(_ *kgo.Record, err error) {
	defer k.pending.Done()
	k.queued.Add(-1)
	if err != nil {
		k.dropped.Add(1)
		return
	}
	k.published.Add(1)
}

func (k *Kafka) record(ev Event) (*kgo.Record, error) {
	v, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("turnstile/events: encode event %s: %w", ev.ID, err)
	}
	return &kgo.Record{Topic: k.topic, Key: []byte(ev.Key), Value: v, Timestamp: ev.Timestamp}, nil
}

// Publish sends evs, in order, and returns once the brokers acknowledged
// all of them, or with the first error (an invalid event is refused
// before anything is sent); an error that matches ErrTooLarge when a
// record was refused as too large. Events of one key keep their order in the
// topic. Publish is safe for concurrent use. When ctx ends, events not yet
// sent fail at once; an event already sent to a broker is waited for
// (at most the produce request timeout, 10 s by default), since
// abandoning it would break the idempotent producer's deduplication.
func (k *Kafka) Publish(ctx context.Context, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		if err := ev.Validate(); err != nil {
			return fmt.Errorf("turnstile/events: publish event %d of %d: %w", i+1, len(evs), err)
		}
		r, err := k.record(ev)
		if err != nil {
			return err
		}
		recs[i] = r
	}
	if k.closed.Load() {
		return ErrClosed
	}
	res := k.cl.ProduceSync(ctx, recs...)
	// The results come in the order the broker answered, not that of
	// recs.
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		index[r] = i
	}
	var ok uint64
	acked := make([]bool, len(recs))
	for _, r := range res {
		if i, known := index[r.Record]; known && r.Err == nil {
			ok++
			acked[i] = true
		}
	}
	k.published.Add(ok)
	if err := res.FirstErr(); err != nil {
		switch {
		case errors.Is(err, kgo.ErrClientClosed):
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		case tooLarge(res) != nil:
			// Whatever else failed, this one will fail again: say so.
			err = fmt.Errorf("%w: %w", ErrTooLarge, tooLarge(res))
		}
		return &PublishError{Acked: acked, err: fmt.Errorf("turnstile/events: publish %d events to %s (%d acknowledged): %w", len(evs), k.topic, ok, k.conns.cause(err))}
	}
	return nil
}

// PublishError is the error of a Publish of which some events failed:
// it says which the broker acknowledged, so that a caller that sends the
// others again need not send those twice.
type PublishError struct {
	// Acked[i] reports whether the broker acknowledged the i-th event
	// given to Publish.
	Acked []bool
	err   error
}

func (e *PublishError) Error() string { return e.err.Error() }

// Unwrap returns why the events failed.
func (e *PublishError) Unwrap() error { return e.err }

// tooLarge is the error of the first record of res refused as too large,
// or nil. A broker refuses a whole batch of records as too large, so the
// other records of a refused batch fail with it, and only a record sent
// alone tells which one is too large.
func tooLarge(res kgo.ProduceResults) error {
	for _, r := range res {
		if errors.Is(r.Err, kerr.MessageTooLarge) || errors.Is(r.Err, kerr.RecordListTooLarge) {
			return r.Err
		}
	}
	return nil
}

// Dropped returns how many observed events never reached Kafka: observed
// while the buffer was full or after Close, or failed or abandoned in
// delivery.
func (k *Kafka) Dropped() uint64 { return k.dropped.Load() }

// Published returns how many events (observed or published) Kafka
// acknowledged.
func (k *Kafka) Published() uint64 { return k.published.Load() }

// Flush waits until every event observed or published before it is
// acknowledged or has failed, or until ctx is done. With a client given
// by WithClient it flushes that client's other records too.
func (k *Kafka) Flush(ctx context.Context) error {
	if k.closed.Load() {
		return ErrClosed
	}
	if err := k.cl.Flush(ctx); err != nil {
		return fmt.Errorf("turnstile/events: flush: %w", k.conns.cause(err))
	}
	return nil
}

// Close stops taking events, waits up to the close timeout
// (WithCloseTimeout) for the buffered ones to be acknowledged, drops and
// counts the rest, and closes the client NewKafka created; Dropped and
// Published are final when it returns (with a client given by WithClient,
// only if everything was acknowledged in time). It returns an error when
// events were left behind. Calling it again does nothing.
func (k *Kafka) Close() error {
	// Under the write lock: Observe calls under way finish first, and none
	// starts after it.
	k.mu.Lock()
	first := k.closed.CompareAndSwap(false, true)
	k.mu.Unlock()
	if !first {
		return nil
	}
	var err error
	if k.closeTimeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), k.closeTimeout)
		err = k.cl.Flush(ctx)
		cancel()
	}
	k.cancel() // abandons observed records not yet sent
	if k.own {
		k.cl.Close() // fails every record left
	}
	if k.own || err == nil {
		// Every observed record has its answer, or is about to: wait for
		// the promises so that Dropped and Published are final.
		k.pending.Wait()
	}
	if err != nil {
		return fmt.Errorf("turnstile/events: close: events left unacknowledged after %v: %w", k.closeTimeout, err)
	}
	return nil
}

// connWatch remembers how the client's last connection to a broker
// failed: the client retries a refused TLS handshake or SASL login until
// the caller's context ends, and the context's error alone would not say
// why nothing was delivered.
type connWatch struct {
	tls, sasl bool // the client dials with TLS, logs in with SASL

	mu   sync.Mutex
	last error // nil after a connection that succeeded
}

var _ kgo.HookBrokerConnect = (*connWatch)(nil)

func (w *connWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.mu.Lock()
	w.last = err
	w.mu.Unlock()
}

// cause adds to err how the last connection to a broker failed, if it
// did. A broker that closes the connection at once says no more than
// EOF: that is a hint of what it wants.
func (w *connWatch) cause(err error) error {
	if w == nil {
		return err
	}
	w.mu.Lock()
	last := w.last
	w.mu.Unlock()
	if last == nil || errors.Is(err, last) {
		return err
	}
	var hint string
	var first *kgo.ErrFirstReadEOF
	switch {
	case errors.As(last, &first): // franz-go's message says what it suspects
	case !errors.Is(last, io.EOF):
	case w.sasl:
		hint = "; the broker closed the connection, as brokers do when they refuse a SASL login: check the user, password and mechanism"
	case !w.tls:
		hint = "; the broker closed the connection: is it expecting TLS? use WithTLS or WithTLSFiles"
	}
	return fmt.Errorf("%w (last connection to a broker: %w%s)", err, last, hint)
}
