package idempotency

import (
	"context"
	_ "embed" // the SQL
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed sql/schema.sql
	schemaSQL string
	//go:embed sql/claim.sql
	claimSQL string
	//go:embed sql/takeover.sql
	takeoverSQL string
	//go:embed sql/lookup.sql
	lookupSQL string
	//go:embed sql/renew.sql
	renewSQL string
	//go:embed sql/store.sql
	storeSQL string
	//go:embed sql/release.sql
	releaseSQL string
	//go:embed sql/purge.sql
	purgeSQL string
)

// Querier runs SQL: pgx.Tx, *pgx.Conn and *pgxpool.Pool satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate creates the table turnstile_idempotency and its index if they
// do not exist. It is safe to run at every start, from several processes
// at once. Run it before the first Do of a Postgres store.
func Migrate(ctx context.Context, db Querier) error {
	if db == nil {
		return fmt.Errorf("%w: Migrate needs a database", ErrNilClient)
	}
	if _, err := db.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("turnstile/idempotency: migrate: %w", err)
	}
	return nil
}

// Postgres is a Store on PostgreSQL, in the table turnstile_idempotency
// (see Migrate): one row per request key, whose primary key guarantees
// that of concurrent first calls exactly one inserts its claim. A row
// holds the running call's claim, renewed while fn runs, or the result.
// Expiry is judged by the database server's clock, never the client's.
//
// Expired rows (results past their retention, claims of crashed runners)
// count as absent: the next call with that key takes the row over. They
// stay in the table until deleted: run Purge periodically (every few
// minutes, say, from one instance or several) to keep the table small.
//
// A result is stored by a committed transaction, so a replay survives
// restarts and failover as far as the database's own durability goes.
// Duplicates waiting WithWait poll the table with backoff (2 ms doubling
// to 100 ms), each poll one round trip on a pooled connection; claim
// renewals use the same pool, so size it for the requests that run at
// once plus their waiting duplicates.
type Postgres struct {
	r    runner
	pool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

// NewPostgres returns a Store on the database pool connects to. Run
// Migrate once before the first Do. The caller keeps ownership of pool.
func NewPostgres(pool *pgxpool.Pool, opts ...Option) (*Postgres, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: NewPostgres needs a *pgxpool.Pool", ErrNilClient)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("turnstile/idempotency: NewPostgres: %w", err)
	}
	s := &Postgres{pool: pool}
	s.r = runner{cfg: cfg, b: (*pgBackend)(s)}
	return s, nil
}

// Do implements Store. Keys must also be valid UTF-8 without NUL bytes,
// as PostgreSQL text requires.
func (s *Postgres) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, bool, error) {
	if !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return nil, false, fmt.Errorf("turnstile/idempotency: %w: PostgreSQL keys must be UTF-8 without NUL bytes: %q", turnstile.ErrInvalidKey, key)
	}
	return s.r.Do(ctx, key, fn)
}

// purgeBatch is how many rows one Purge transaction deletes at most, so
// that purging a large backlog never holds many row locks for long.
const purgeBatch = 5000

// Purge deletes expired rows — results past their retention and claims of
// crashed runners — in batches, and returns how many it deleted. Expired
// rows already count as absent, so Purge changes no answer of Do; it only
// keeps the table small. Run it periodically.
func (s *Postgres) Purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, purgeSQL, purgeBatch)
		if err != nil {
			return total, fmt.Errorf("turnstile/idempotency: postgres: purge: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < purgeBatch {
			return total, nil
		}
	}
}

func (s *Postgres) runner() *runner { return &s.r }

// pgBackend is Postgres's backend.
type pgBackend Postgres

func (b *pgBackend) name() string { return "postgres" }

func us(d time.Duration) int64 { return d.Microseconds() }

// claimAttempts bounds how often claim starts over when the row it
// conflicted with vanished before it could be read (released or purged
// in between): each attempt is one round trip.
const claimAttempts = 10

func (b *pgBackend) claim(ctx context.Context, key, owner string) (outcome, error) {
	ttl := us(b.r.cfg.claimTTL)
	for range claimAttempts {
		// One round trip, one implicit transaction: insert a claim unless
		// a row exists, else take the row over if it expired, then read
		// what holds the key now.
		batch := &pgx.Batch{}
		batch.Queue(claimSQL, key, owner, ttl)
		batch.Queue(takeoverSQL, key, owner, ttl)
		batch.Queue(lookupSQL, key)
		br := b.pool.SendBatch(ctx, batch)
		var (
			st      string
			result  []byte
			holder  *string
			expired bool
		)
		_, err := br.Exec()
		if err == nil {
			_, err = br.Exec()
		}
		if err == nil {
			err = br.QueryRow().Scan(&st, &result, &holder, &expired)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue
		case err != nil:
			return outcome{}, err
		}
		o, retry, err := pgOutcome(st, result, holder, expired, owner)
		if err != nil {
			return outcome{}, fmt.Errorf("row of turnstile_idempotency: %w", err)
		}
		if !retry {
			return o, nil
		}
	}
	return outcome{}, fmt.Errorf("the row changed under %d claim attempts in a row", claimAttempts)
}

func (b *pgBackend) renew(ctx context.Context, key, owner string) (bool, error) {
	return affected(b.pool.Exec(ctx, renewSQL, key, owner, us(b.r.cfg.claimTTL)))
}

func (b *pgBackend) complete(ctx context.Context, key, owner string, result []byte) (bool, error) {
	if result == nil {
		// Stored as an empty value, not NULL, so that a replay can tell a
		// result from none.
		result = []byte{}
	}
	return affected(b.pool.Exec(ctx, storeSQL, key, owner, result, us(b.r.cfg.retention)))
}

func (b *pgBackend) release(ctx context.Context, key, owner string) (bool, error) {
	return affected(b.pool.Exec(ctx, releaseSQL, key, owner))
}

func affected(tag pgconn.CommandTag, err error) (bool, error) {
	return err == nil && tag.RowsAffected() == 1, err
}
