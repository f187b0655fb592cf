package outbox

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
)

var (
	//go:embed lease.sql
	leaseSQL string
	//go:embed dead.sql
	deadSQL string
)

// ErrNoTable: the outbox table does not exist; run Migrate.
var ErrNoTable = errors.New("turnstile/outbox: table turnstile_outbox missing (run Migrate)")

// Relay publishes the events of the outbox table, oldest first, and
// marks them sent. Several relays, in one process or many, may run on one
// table; see the package doc for what they guarantee.
type Relay struct {
	pool  *pgxpool.Pool
	pub   events.Publisher
	batch int
	poll  time.Duration
	claim time.Duration
	log   *slog.Logger

	listens      bool
	deadLettered atomic.Uint64
	deadCounter  prometheus.Counter // nil without WithRegisterer
}

// An Option configures NewRelay.
type Option func(*Relay) error

// WithBatchSize sets how many rows a relay claims at once, 1 to 10,000.
// Default 100.
func WithBatchSize(n int) Option {
	return func(r *Relay) error {
		if n < 1 || n > 10000 {
			return fmt.Errorf("%w: outbox batch size %d, want 1 to 10000", turnstile.ErrInvalidOption, n)
		}
		r.batch = n
		return nil
	}
}

// WithPollInterval sets how long Run waits before looking again when it
// found fewer rows than a full batch, unless a NOTIFY from the outbox's
// trigger wakes it first; after a failure it waits twice as long each
// time, up to 5 s (or d, if longer). Default 100 ms.
func WithPollInterval(d time.Duration) Option {
	return func(r *Relay) error {
		if d <= 0 {
			return fmt.Errorf("%w: outbox poll interval %v, want > 0", turnstile.ErrInvalidOption, d)
		}
		r.poll = d
		return nil
	}
}

// WithClaimTimeout sets how long the publish of one batch may take; past
// it the batch is given back (rolled back) and tried again. It also
// bounds how long a relay that stops answering keeps its rows: PostgreSQL
// ends a session idle in its claiming transaction for twice this time.
// Default 30 s.
func WithClaimTimeout(d time.Duration) Option {
	return func(r *Relay) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: outbox claim timeout %v, want at least 1ms", turnstile.ErrInvalidOption, d)
		}
		r.claim = d
		return nil
	}
}

// WithoutListen makes Run poll only, without the LISTEN connection it
// otherwise opens beyond the pool to be woken when rows are added (for
// poolers that do not pass notices on, such as PgBouncer in transaction
// mode). Default: Run listens.
func WithoutListen() Option {
	return func(r *Relay) error {
		r.listens = false
		return nil
	}
}

// WithRegisterer registers with reg the counter
// turnstile_outbox_dead_lettered_total: rows moved to the dead-letter
// table because they could not be decoded or the broker refused them as
// too large (see DeadLettered). Relays given the same registerer share
// the counter. Default: no metrics.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(r *Relay) error {
		if isNil(reg) {
			return fmt.Errorf("%w: nil prometheus registerer", turnstile.ErrInvalidOption)
		}
		c := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_outbox_dead_lettered_total",
			Help: "Outbox rows a relay could not decode, or whose events the broker refused as too large, moved to turnstile_outbox_dead.",
		})
		if err := reg.Register(c); err != nil {
			are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
			if !ok {
				return fmt.Errorf("turnstile/outbox: register metrics: %w", err)
			}
			if c, ok = are.ExistingCollector.(prometheus.Counter); !ok {
				return fmt.Errorf("turnstile/outbox: register metrics: %w", err)
			}
		}
		r.deadCounter = c
		return nil
	}
}

// WithLogger sets where failed batches (the relay retries them) and
// dead-lettered rows (one line each) are logged. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(r *Relay) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", turnstile.ErrInvalidOption)
		}
		r.log = l
		return nil
	}
}

// NewRelay returns a relay that reads the outbox through pool and
// publishes with pub (an *events.Kafka, say).
func NewRelay(pool *pgxpool.Pool, pub events.Publisher, opts ...Option) (*Relay, error) {
	if pool == nil {
		return nil, ErrNilDB
	}
	if isNil(pub) {
		return nil, fmt.Errorf("%w: nil publisher", turnstile.ErrInvalidOption)
	}
	r := &Relay{pool: pool, pub: pub, batch: 100, poll: 100 * time.Millisecond, claim: 30 * time.Second, log: slog.Default(), listens: true}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", turnstile.ErrInvalidOption)
		}
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Run relays batches until ctx is done, and then returns ctx's error. It
// looks for rows when woken by the outbox's NOTIFY (see WithoutListen) and
// at least every poll interval. A failed batch (database or broker
// unreachable) is logged and tried again; Run returns early only with
// ErrNoTable.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	if r.listens {
		lctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { r.listen(lctx, wake) })
		defer wg.Wait()
		defer cancel()
	}
	wait := r.poll
	for {
		_, n, err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("turnstile/outbox: relay: %w", ctx.Err())
		}
		switch {
		case errors.Is(err, ErrNoTable):
			return err
		case err != nil:
			r.log.Warn("turnstile/outbox: relay batch failed; retrying", "err", err, "retry_in", wait)
		case n == r.batch:
			wait = r.poll
			continue // more are likely waiting
		default:
			wait = r.poll
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("turnstile/outbox: relay: %w", ctx.Err())
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		if err != nil {
			wait = min(2*wait, max(5*time.Second, r.poll))
		}
	}
}

// RunOnce relays one batch: it claims up to the batch size of the oldest
// unsent rows, publishes those no other relay's rows precede, marks them
// sent and commits, and returns how many it sent. Rows it cannot decode
// are moved to the dead-letter table in the same transaction (see the
// package doc). On an error nothing is marked or moved; events already
// handed to the broker will be sent again.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n, _, err := r.runOnce(ctx)
	return n, err
}

// runOnce is RunOnce, and also returns how many rows it claimed (sent or
// dead-lettered).
func (r *Relay) runOnce(ctx context.Context) (sent, claimed int, err error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("turnstile/outbox: begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = tx.Rollback(rctx) // after Commit: nothing to do
		cancel()
	}()
	idle := strconv.FormatInt((2 * r.claim).Milliseconds(), 10)
	if _, err := tx.Exec(ctx, leaseSQL, idle); err != nil {
		return 0, 0, fmt.Errorf("turnstile/outbox: claim: %w", err)
	}
	rows, err := tx.Query(ctx, claimSQL, r.batch)
	if err != nil {
		return 0, 0, r.claimErr(err)
	}
	var (
		ids  []int64
		evs  []events.Event
		dead []deadRow
	)
	for rows.Next() {
		var (
			id      int64
			key     string
			payload []byte
		)
		if err := rows.Scan(&id, &key, &payload); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("turnstile/outbox: claim: %w", err)
		}
		claimed++
		ev, err := decodeRow(key, payload)
		if err != nil {
			dead = append(dead, deadRow{id: id, key: key, reason: err.Error(), log: undecodableLog})
			continue
		}
		ids, evs = append(ids, id), append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, r.claimErr(err)
	}
	if claimed == 0 {
		return 0, 0, nil
	}
	if len(evs) > 0 {
		// One deadline for the batch and, if it comes to that, for
		// sending its events one by one: the claim times out after twice
		// the claim timeout idle.
		pctx, cancel := context.WithTimeout(ctx, r.claim)
		err = r.pub.Publish(pctx, evs...)
		if errors.Is(err, events.ErrTooLarge) {
			var refused []deadRow
			ids, evs, refused, err = r.publishAlone(pctx, ids, evs, err)
			dead = append(dead, refused...)
		}
		cancel()
		if err != nil {
			return 0, 0, fmt.Errorf("turnstile/outbox: publish %d events: %w", len(evs), err)
		}
	}
	// Published: record it even if ctx ends now, or the batch is sent twice.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.claim)
	defer cancel()
	if len(dead) > 0 {
		deadIDs, reasons := make([]int64, len(dead)), make([]string, len(dead))
		for i, d := range dead {
			deadIDs[i], reasons[i] = d.id, d.reason
		}
		if _, err := tx.Exec(mctx, deadSQL, deadIDs, reasons); err != nil {
			return 0, 0, fmt.Errorf("turnstile/outbox: move %d rows to turnstile_outbox_dead: %w", len(dead), err)
		}
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(mctx, markSQL, ids); err != nil {
			return 0, 0, fmt.Errorf("turnstile/outbox: mark %d events sent: %w", len(ids), err)
		}
	}
	if err := tx.Commit(mctx); err != nil {
		return 0, 0, fmt.Errorf("turnstile/outbox: mark %d events sent, %d rows dead: %w", len(ids), len(dead), err)
	}
	// Once per row, after the commit: a batch retried logs nothing twice.
	for _, d := range dead {
		r.log.Error(d.log, "id", d.id, "key", d.key, "err", d.reason)
	}
	r.deadLettered.Add(uint64(len(dead)))
	if r.deadCounter != nil {
		r.deadCounter.Add(float64(len(dead)))
	}
	return len(evs), claimed, nil
}

// deadRow is a claimed row on its way to the dead-letter table: why, and
// the line logged once it is there.
type deadRow struct {
	id          int64
	key, reason string
	log         string
}

// undecodableLog is the line logged for a row the relay could not
// decode.
const undecodableLog = "turnstile/outbox: undecodable row moved to turnstile_outbox_dead; later events of its key are published without it (outbox.Requeue puts it back once fixed)"

// DeadLettered returns how many rows this relay moved to the
// dead-letter table turnstile_outbox_dead: rows it could not decode, and
// events the broker refused as too large.
func (r *Relay) DeadLettered() uint64 { return r.deadLettered.Load() }

func (r *Relay) claimErr(err error) error {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42P01" {
		return fmt.Errorf("%w: %w", ErrNoTable, err)
	}
	return fmt.Errorf("turnstile/outbox: claim: %w", err)
}
