package stock

import (
	"context"
	_ "embed" // the SQL
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed cas.sql
	casSQL string
	//go:embed set.sql
	setSQL string
	//go:embed put.sql
	putSQL string
)

const (
	readSQL = "SELECT quantity, version FROM turnstile_stock WHERE id = $1"
	leftSQL = "SELECT quantity FROM turnstile_stock WHERE id = $1"
)

// Querier runs SQL: pgx.Tx, *pgx.Conn and *pgxpool.Pool satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate creates table turnstile_stock if it is missing:
//
//	turnstile_stock(id text PRIMARY KEY,
//	                quantity bigint NOT NULL CHECK (quantity >= 0),
//	                version bigint NOT NULL)
//
// It is idempotent and safe to run from several processes at once:
// migrations wait for each other on a transaction-scoped advisory lock,
// which a db that is a pgx.Tx holds until that transaction ends.
func Migrate(ctx context.Context, db Querier) error {
	if db == nil {
		return fmt.Errorf("%w: nil querier", turnstile.ErrInvalidOption)
	}
	_, err := db.Exec(ctx, schemaSQL) // no arguments: pgx sends it as one simple query
	if err != nil {
		return fmt.Errorf("stock: create table turnstile_stock: %w", err)
	}
	return nil
}

// CAS is a stock held in rows of table turnstile_stock (see Migrate), taken
// by optimistic compare-and-set: read the quantity and the
// row's version, refuse the order if too few units are left, else
//
//	UPDATE turnstile_stock SET quantity = quantity - n, version = version + 1
//	 WHERE id = $1 AND version = $2
//
// An update that finds the version changed touched nothing: another order
// came first, and Take reads again after a pause (full jitter: uniform in
// [0, base·2^retry), at most 1 s; 3 retries from a 10 ms base by default,
// so pauses under 10, 20 and 40 ms). When every retry lost, Take returns
// ErrConflict and the order may be tried again.
//
// Guarantee: the quantity never goes below zero — each update is checked
// against the quantity it read, and the table's CHECK refuses a negative
// one whatever else writes to it — and no unit is sold twice. On one hot
// row, attempts lose in proportion to how many run at once (up to one
// per pool connection): each success costs the others a read and a failed
// update. An attempt holds one connection for its read
// and its update; Take holds none while it pauses.
//
// A CAS is safe for concurrent use; it holds no state besides the pool.
type CAS struct {
	pool *pgxpool.Pool
	cfg  casConfig
}

// NewCAS returns a CAS on the pool's database. Run Migrate once before
// using it; NewCAS itself makes no round trip.
func NewCAS(pool *pgxpool.Pool, opts ...CASOption) (*CAS, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pgxpool.Pool", turnstile.ErrInvalidOption)
	}
	cfg := defaultCASConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil stock option", turnstile.ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &CAS{pool: pool, cfg: cfg}, nil
}

// Set stores n units for id, creating its row if needed. Orders that read
// the old level lose their compare-and-set and read again.
func (c *CAS) Set(ctx context.Context, id string, n int64) error {
	if err := checkKey("stock id", id); err != nil {
		return err
	}
	if err := checkTotal(n); err != nil {
		return err
	}
	if _, err := c.pool.Exec(ctx, setSQL, id, n); err != nil {
		return fmt.Errorf("stock: set %q: %w", id, err)
	}
	return nil
}

// Take takes n units of id and returns how many are left after it. When
// fewer than n are left (or id has no row) it takes nothing and returns
// ErrSoldOut, with left the level it read; when every attempt lost to a
// concurrent update it takes nothing and returns ErrConflict.
func (c *CAS) Take(ctx context.Context, id string, n int64) (left int64, err error) {
	if err := checkKey("stock id", id); err != nil {
		return 0, err
	}
	if err := checkQuantity(n); err != nil {
		return 0, err
	}
	for retry := 0; ; retry++ {
		left, done, err := c.attempt(ctx, id, n)
		if done {
			return left, err
		}
		if retry == c.cfg.retries {
			return 0, fmt.Errorf("%w: %q changed under each of %d attempts", ErrConflict, id, retry+1)
		}
		if err := c.pause(ctx, retry); err != nil {
			return 0, fmt.Errorf("stock: take %d from %q: %w", n, id, err)
		}
	}
}

// attempt reads the row and tries the compare-and-set once; done is false
// when another write came between the two. Both statements run on one
// connection, so the time between them is one round trip rather than a
// wait for a free connection among every order queued at the pool: a wait
// that, under a rush, would make nearly every compare-and-set lose.
func (c *CAS) attempt(ctx context.Context, id string, n int64) (left int64, done bool, err error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return 0, true, fmt.Errorf("stock: take %d from %q: %w", n, id, err)
	}
	defer conn.Release()
	var quantity, version int64
	err = conn.QueryRow(ctx, readSQL, id).Scan(&quantity, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, true, fmt.Errorf("%w: %q has no stock row", ErrSoldOut, id)
	}
	if err != nil {
		return 0, true, fmt.Errorf("stock: read %q: %w", id, err)
	}
	if quantity < n {
		return quantity, true, fmt.Errorf("%w: %q has %d units, %d asked", ErrSoldOut, id, quantity, n)
	}
	err = conn.QueryRow(ctx, casSQL, id, version, n).Scan(&left)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, true, fmt.Errorf("stock: take %d from %q: %w", n, id, err)
	}
	return left, true, nil
}

// pause sleeps before retry number retry+1: full jitter over
// [0, base·2^retry), capped at maxCASBackoff; it returns early with the
// context's error.
func (c *CAS) pause(ctx context.Context, retry int) error {
	ceiling := min(c.cfg.backoff<<retry, maxCASBackoff)
	t := time.NewTimer(rand.N(ceiling))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Put gives n units of id back (a cancelled order), creating its row if
// needed, and returns the level after it. It is one atomic increment: it
// cannot oversell, so it needs no compare-and-set and never conflicts.
func (c *CAS) Put(ctx context.Context, id string, n int64) (left int64, err error) {
	if err := checkKey("stock id", id); err != nil {
		return 0, err
	}
	if err := checkQuantity(n); err != nil {
		return 0, err
	}
	if err := c.pool.QueryRow(ctx, putSQL, id, n).Scan(&left); err != nil {
		return 0, fmt.Errorf("stock: put %d into %q: %w", n, id, err)
	}
	return left, nil
}

// Left returns how many units of id are left; an id with no row has none.
func (c *CAS) Left(ctx context.Context, id string) (int64, error) {
	if err := checkKey("stock id", id); err != nil {
		return 0, err
	}
	var n int64
	err := c.pool.QueryRow(ctx, leftSQL, id).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stock: read %q: %w", id, err)
	}
	return n, nil
}
