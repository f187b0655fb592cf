package claim

import (
	"context"
	_ "embed" // the SQL
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/turnstilelock/turnstile"
)

//go:embed sql/postgres_schema.sql
var postgresSchemaSQL string

// Querier runs SQL on PostgreSQL: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate creates the tables turnstile_coupons and turnstile_jobs and
// their indexes on PostgreSQL if they are missing (sql/postgres_schema.sql
// holds the statements). It is idempotent and safe to run from several
// processes at once: migrations wait for each other on a
// transaction-scoped advisory lock, which a db that is a pgx.Tx holds
// until that transaction ends.
func Migrate(ctx context.Context, db Querier) error {
	if db == nil {
		return fmt.Errorf("%w: nil querier", turnstile.ErrInvalidOption)
	}
	// No arguments: pgx sends it as one simple query, one transaction.
	if _, err := db.Exec(ctx, postgresSchemaSQL); err != nil {
		return fmt.Errorf("claim: create tables turnstile_coupons and turnstile_jobs: %w", err)
	}
	return nil
}
