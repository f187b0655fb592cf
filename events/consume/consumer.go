package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/internal/kafkaopt"
)

// ErrClosed: the consumer was closed.
var ErrClosed = errors.New("turnstile/events/consume: consumer closed")

// ErrRunning: Run was called while another Run of the same consumer was
// under way.
var ErrRunning = errors.New("turnstile/events/consume: consumer already running")

// A Handler applies one lock event: it makes the event's change in the
// application's storage and stores PositionOf(ev) with it, atomically,
// so that LastApplied returns it afterwards. An error stops Run, or has
// the event handed over again first (WithRetry).
type Handler func(ctx context.Context, ev events.Event) error

// LastApplied returns the position of the last event the application
// applied for key, as its Handler stored it, or the zero Position when
// none was. The consumer asks it when an event comes for a key whose
// position it does not hold in memory; an error is treated as the
// Handler's.
type LastApplied func(ctx context.Context, key string) (Position, error)

// PoisonError is the error of a record that does not hold a lock event:
// a value events.Decode refuses (Err is then its *events.FieldError), or
// an event whose key is not the record's. It names the record, never
// repeats its value.
type PoisonError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *PoisonError) Error() string {
	return fmt.Sprintf("turnstile/events/consume: poison record %s/%d offset %d skipped: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *PoisonError) Unwrap() error { return e.Err }

// Stats counts what a consumer did with the records it read.
type Stats struct {
	Applied    uint64 // events the Handler applied
	Duplicates uint64 // events dropped because their id was applied already
	Stale      uint64 // events dropped because their position is not after the key's
	Poison     uint64 // records that hold no lock event (PoisonError)
}

// Consumer reads lock events from Kafka in a consumer group and hands
// each to a Handler once, in each key's order; see the package doc.
type Consumer struct {
	cl      *kgo.Client
	last    LastApplied
	cfg     config
	applied atomic.Uint64
	dups    atomic.Uint64
	stale   atomic.Uint64
	poison  atomic.Uint64

	// mu guards the key states. Run holds it while it handles a record,
	// so that a revoked or lost partition's keys are forgotten between
	// two records, never while one is applied.
	mu   sync.Mutex
	keys *keyCache

	life    sync.Mutex
	closed  bool
	running bool
	joined  bool               // the first Run added the topic
	stop    context.CancelFunc // of the Run under way
	done    chan struct{}      // closed when the Run under way returns
}

// New returns a consumer in the consumer group group reading the lock
// events topic from the brokers at seeds ("host:port"). It does not dial
// or join the group: the first Run does. last tells the application's position of a key (see
// LastApplied); it is what makes a restarted consumer, or one that
// forgot a key, never apply an event twice or out of order.
//
// The client New creates commits offsets itself, only after the records
// before them were handled (automatic commits are off), and blocks a
// rebalance while it handles what a poll returned. Close closes it.
func New(seeds []string, group string, last LastApplied, opts ...Option) (*Consumer, error) {
	cfg := defaults()
	if err := kafkaopt.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	switch {
	case len(seeds) == 0:
		return nil, fmt.Errorf("%w: no kafka seed addresses", turnstile.ErrInvalidOption)
	case group == "":
		return nil, fmt.Errorf("%w: empty consumer group", turnstile.ErrInvalidOption)
	case last == nil:
		return nil, fmt.Errorf("%w: nil LastApplied: the consumer needs the application's position of a key it does not hold", turnstile.ErrInvalidOption)
	}
	for _, s := range seeds {
		if s == "" {
			return nil, fmt.Errorf("%w: empty kafka seed address", turnstile.ErrInvalidOption)
		}
	}
	c := &Consumer{last: last, cfg: cfg, keys: newKeyCache(cfg.maxKeys)}
	kopts := append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumerGroup(group), // joined by the first Run: AddConsumeTopics
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsRevoked(c.forget),
		kgo.OnPartitionsLost(c.forget),
	}, cfg.kgoOpts...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: kafka client: %w", turnstile.ErrInvalidOption, err)
	}
	c.cl = cl
	if cfg.reg != nil {
		if err := c.register(cfg.reg); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Consumer) register(reg prometheus.Registerer) error {
	for _, m := range []struct {
		result string
		n      *atomic.Uint64
	}{{"applied", &c.applied}, {"duplicate", &c.dups}, {"stale", &c.stale}, {"poison", &c.poison}} {
		cf := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "turnstile_events_consumed_total",
			Help:        "Lock event records a consumer read, by what it did with them: applied, duplicate (dropped), stale (dropped), poison (skipped).",
			ConstLabels: prometheus.Labels{"result": m.result},
		}, func() float64 { return float64(m.n.Load()) })
		if err := reg.Register(cf); err != nil {
			return fmt.Errorf("turnstile/events/consume: register metrics: %w", err)
		}
	}
	return nil
}

// forget drops the keys of partitions the consumer no longer reads:
// another member may apply their later events, so what this one holds
// of them could fall behind the application's.
func (c *Consumer) forget(_ context.Context, _ *kgo.Client, partitions map[string][]int32) {
	c.mu.Lock()
	c.keys.forget(partitions)
	c.mu.Unlock()
}

// Stats returns the consumer's counts so far.
func (c *Consumer) Stats() Stats {
	return Stats{Applied: c.applied.Load(), Duplicates: c.dups.Load(), Stale: c.stale.Load(), Poison: c.poison.Load()}
}

// Run reads events and hands them to h until ctx ends, the consumer is
// closed, or h fails; it returns why. Each event with a token is handed
// over at most once, in its key's order (see the package doc for events
// without one); a duplicate or stale one is dropped and counted, a
// poison record is counted, reported to the error handler and skipped.
// After the records of a poll are handled, their offsets are committed.
//
// When h (or LastApplied) fails, after the attempts WithRetry allows, Run
// commits the offsets of the records handled before, sets the consumer
// back to the failed record, and returns an error wrapping h's. Calling
// Run again hands the failed event over again; so does a new consumer
// of the group. When ctx ends Run commits the same way and returns an
// error wrapping ctx's. Between two Runs the consumer stays in the group
// and keeps its partitions: Close it to hand them to the other members.
func (c *Consumer) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil handler", turnstile.ErrInvalidOption)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.life.Lock()
	switch {
	case c.closed:
		c.life.Unlock()
		return ErrClosed
	case c.running:
		c.life.Unlock()
		return ErrRunning
	}
	c.running, c.stop, c.done = true, cancel, make(chan struct{})
	done := c.done
	if !c.joined {
		c.joined = true
		c.cl.AddConsumeTopics(c.cfg.topic)
	}
	c.life.Unlock()
	defer func() {
		c.life.Lock()
		c.running, c.stop = false, nil
		close(done)
		c.life.Unlock()
	}()

	for {
		fs := c.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			c.cl.AllowRebalance()
			return ErrClosed
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				c.cfg.onError(fmt.Errorf("turnstile/events/consume: fetch %s/%d: %w", topic, p, err))
			}
		})
		err := c.handle(ctx, fs, h)
		c.cl.AllowRebalance()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			c.life.Lock()
			closed := c.closed
			c.life.Unlock()
			if closed {
				return ErrClosed
			}
			return fmt.Errorf("turnstile/events/consume: run: %w", err)
		}
	}
}

// handle handles the records of one poll in order, commits the offsets
// of those it handled, and sets the partitions back to the first record
// it did not handle if it stopped early.
func (c *Consumer) handle(ctx context.Context, fs kgo.Fetches, h Handler) error {
	var (
		handled []*kgo.Record                            // the last handled record of each partition
		rewind  = map[string]map[int32]kgo.EpochOffset{} // the first record not handled
		stopErr error
	)
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		var last *kgo.Record
		for _, r := range p.Records {
			if stopErr == nil {
				if stopErr = ctx.Err(); stopErr == nil {
					stopErr = c.record(ctx, r, h)
				}
			}
			if stopErr != nil {
				if rewind[r.Topic] == nil {
					rewind[r.Topic] = map[int32]kgo.EpochOffset{}
				}
				rewind[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
				break
			}
			last = r
		}
		if last != nil {
			handled = append(handled, last)
		}
	})
	if len(handled) > 0 {
		// Handled: commit even if ctx ended, or they are handed over again.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := c.cl.CommitRecords(cctx, handled...); err != nil {
			c.cfg.onError(fmt.Errorf("turnstile/events/consume: commit offsets (the events applied since the last commit may be read again; their positions drop them): %w", err))
		}
		cancel()
	}
	if len(rewind) > 0 {
		c.cl.SetOffsets(rewind)
	}
	if stopErr != nil && ctx.Err() != nil {
		return nil // Run returns ctx's error
	}
	return stopErr
}

// record handles one record; it returns an error only when the event
// was not applied and must be handed over again.
func (c *Consumer) record(ctx context.Context, r *kgo.Record, h Handler) error {
	ev, err := events.Decode(r.Value)
	if err == nil && string(r.Key) != ev.Key {
		err = &events.FieldError{Field: "key", Reason: fmt.Sprintf("not the record's key (%d bytes)", len(r.Key))}
	}
	if err != nil {
		c.poison.Add(1)
		c.cfg.onError(&PoisonError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err})
		return nil
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.keys.get(ev.Key)
	if st == nil {
		st = &keyState{key: ev.Key}
		c.keys.add(st)
	}
	st.topic, st.partition = r.Topic, r.Partition
	if st.seen(ev.ID) {
		c.dups.Add(1)
		return nil
	}
	fenced := ev.Token != 0
	if fenced && !st.loaded {
		var pos Position
		err := c.try(ctx, func() error {
			var err error
			pos, err = c.last(ctx, ev.Key)
			return err
		})
		if err != nil {
			return fmt.Errorf("turnstile/events/consume: last applied position of key %q (record %s/%d offset %d): %w", ev.Key, r.Topic, r.Partition, r.Offset, err)
		}
		st.pos, st.loaded = pos, true
		if st.seen(ev.ID) {
			c.dups.Add(1)
			return nil
		}
	}
	at := PositionOf(ev)
	if fenced && !st.pos.Before(at) {
		c.stale.Add(1)
		return nil
	}
	if err := c.try(ctx, func() error { return h(ctx, ev) }); err != nil {
		return fmt.Errorf("turnstile/events/consume: handler failed for event %s (%s, key %q, token %d; record %s/%d offset %d): %w",
			ev.ID, ev.Type, ev.Key, ev.Token, r.Topic, r.Partition, r.Offset, err)
	}
	c.applied.Add(1)
	if fenced {
		st.pos = at
	}
	st.remember(ev.ID)
	return nil
}

// try calls f up to the attempts WithRetry allows, waiting between two;
// it returns f's last error, or ctx's if ctx ended.
func (c *Consumer) try(ctx context.Context, f func() error) error {
	var err error
	for i := range c.cfg.attempts {
		if i > 0 {
			t := time.NewTimer(c.cfg.wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Close stops a Run under way (it returns ErrClosed), waits for it, and
// closes the client, leaving the group. Offsets of the events handled
// are committed by then. Calling it again does nothing. It must not be
// called from the Handler or LastApplied, which Run waits for.
func (c *Consumer) Close() {
	c.life.Lock()
	if c.closed {
		c.life.Unlock()
		return
	}
	c.closed = true
	stop, done := c.stop, c.done
	c.life.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	c.cl.Close()
}
