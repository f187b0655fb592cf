package fence

import (
	"context"
	_ "embed" // the SQL
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed postgres_schema.sql
	schemaSQL string
	//go:embed postgres_check.sql
	checkSQL string
	//go:embed postgres_last.sql
	lastSQL string
	//go:embed postgres_abort.sql
	abortSQL string
)

// Querier is what the PostgreSQL guard needs from a connection:
// pgx.Tx, *pgx.Conn and *pgxpool.Pool satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate creates the DefaultTable table if it does not exist. It is
// idempotent and safe to run from several processes at once.
func Migrate(ctx context.Context, db Querier) error {
	return migrate(ctx, db, schemaSQL, DefaultTable)
}

// Postgres is a guard for data in PostgreSQL: Check records a write's
// token in the caller's own transaction, next to the write it protects.
// It holds no connection and is safe for concurrent use.
type Postgres struct {
	cfg                        config
	schema, check, last, table string
}

// NewPostgres returns a PostgreSQL guard. Options: AllowSameToken,
// WithTable.
func NewPostgres(opts ...Option) (*Postgres, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.redisOnly("PostgreSQL"); err != nil {
		return nil, err
	}
	p := &Postgres{cfg: cfg, schema: schemaSQL, check: checkSQL, last: lastSQL, table: DefaultTable}
	if cfg.table != "" {
		p.table = cfg.tableName
		p.schema = strings.ReplaceAll(schemaSQL, DefaultTable, cfg.table)
		p.check = strings.ReplaceAll(checkSQL, DefaultTable, cfg.table)
		p.last = strings.ReplaceAll(lastSQL, DefaultTable, cfg.table)
	}
	return p, nil
}

// Migrate creates the guard's table (DefaultTable, or the one named by
// WithTable) if it does not exist. A schema named in WithTable must exist.
func (p *Postgres) Migrate(ctx context.Context, db Querier) error {
	if p == nil {
		return errNilPostgres
	}
	return migrate(ctx, db, p.schema, p.table)
}

func migrate(ctx context.Context, db Querier, schema, table string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := checkQuerier(db); err != nil {
		return err
	}
	// No arguments: pgx sends the script with the simple protocol, as one
	// implicit transaction, which the advisory lock in it relies on.
	if _, err := db.Exec(ctx, schema); err != nil {
		return fmt.Errorf("turnstile/fence: create table %s: %w", table, err)
	}
	return nil
}

// Check records token as the last one written to resource, inside tx, if
// it is fresh: greater than the last token accepted for resource (or
// equal, with AllowSameToken). Otherwise it returns a *StaleTokenError
// (errors.Is(err, ErrStaleToken)) and aborts tx, so that a
// COMMIT rolls back and the business writes made in tx — before or after
// Check — are never stored. Roll tx back on any error.
//
// tx must be the transaction that makes the write Check protects: the
// row Check writes stays locked until tx ends, so writers of one resource
// pass their checks one at a time, in token order of their commits. Under
// REPEATABLE READ or SERIALIZABLE isolation a concurrent writer's check
// fails with a serialization error (SQLSTATE 40001) instead of waiting;
// retry it in a new transaction.
//
// Tokens above math.MaxInt64 (the largest bigint) give ErrInvalidToken.
func (p *Postgres) Check(ctx context.Context, tx Querier, resource string, token uint64) error {
	if err := p.checkArgs(ctx, tx, resource); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: token %d is above %d, the largest PostgreSQL bigint", ErrInvalidToken, token, int64(math.MaxInt64))
	}
	tag, err := tx.Exec(ctx, p.check, resource, int64(token), p.cfg.allowSame)
	if err != nil {
		return p.dbError("check", resource, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	last, err := p.lastToken(ctx, tx, resource)
	if err != nil {
		return err
	}
	// The error this raises is the point: it marks tx as failed. Without a
	// transaction (a pool) there is nothing to abort.
	_, _ = tx.Exec(ctx, abortSQL)
	return &StaleTokenError{Resource: resource, Token: token, Last: last}
}

// Last returns the last token accepted for resource, 0 if none.
func (p *Postgres) Last(ctx context.Context, db Querier, resource string) (uint64, error) {
	if err := p.checkArgs(ctx, db, resource); err != nil {
		return 0, err
	}
	return p.lastToken(ctx, db, resource)
}

func (p *Postgres) lastToken(ctx context.Context, db Querier, resource string) (uint64, error) {
	var last int64
	err := db.QueryRow(ctx, p.last, resource).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, p.dbError("read last token of", resource, err)
	}
	return uint64(last), nil
}

var errNilPostgres = fmt.Errorf("%w: nil *fence.Postgres", turnstile.ErrInvalidOption)

func (p *Postgres) checkArgs(ctx context.Context, db Querier, resource string) error {
	if p == nil {
		return errNilPostgres
	}
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := checkQuerier(db); err != nil {
		return err
	}
	return checkResource(resource)
}

// dbError wraps a database error, pointing at Migrate when the table is
// missing.
func (p *Postgres) dbError(op, resource string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return fmt.Errorf("turnstile/fence: %s %q: table %s does not exist (create it with Migrate): %w", op, resource, p.table, err)
	}
	return fmt.Errorf("turnstile/fence: %s %q: %w", op, resource, err)
}

// checkQuerier refuses nil, including a typed nil such as (*pgx.Conn)(nil),
// which would panic on use.
func checkQuerier(db Querier) error {
	if db == nil {
		return fmt.Errorf("%w: nil querier", turnstile.ErrInvalidOption)
	}
	if v := reflect.ValueOf(db); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("%w: nil %T", turnstile.ErrInvalidOption, db)
	}
	return nil
}
