package peers

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// ErrNotHeld is a recipe's release that the server answered with "that
// lock was not held".
var ErrNotHeld = errors.New("peers: the server did not hold the lock released")

// PostgresAdvisory is PostgreSQL's own lock, the session advisory lock,
// as its users run it: a pgx pool (pgxpool) with a connection per
// worker; a lock takes a connection from the pool, runs
// pg_advisory_lock(id) on it, which waits in the server until the lock
// is free, and pg_advisory_unlock(id) on the same connection to release
// it, then returns the connection. The id is the key's 64-bit FNV-1a
// hash. The lock is the session's: a connection that dies frees it.
// user and database are whom to connect as (no password, no TLS).
func PostgresAdvisory(user, database string) workload.Library {
	return workload.Library{
		Name:     "pg-advisory",
		Settings: "pg-advisory: pg_advisory_lock(id) and pg_advisory_unlock(id) on a connection held from a pgxpool pool of one connection per worker, id the key's FNV-1a hash",
		Open: func(ctx context.Context, addrs []string, workers int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: pg-advisory takes one server, not %d", workload.ErrUsage, len(addrs))
			}
			cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", user, addrs[0], database))
			if err != nil {
				return nil, fmt.Errorf("pg-advisory: %w", err)
			}
			cfg.MaxConns = int32(max(workers, 1))
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("pg-advisory: %w", err)
			}
			if err := pool.Ping(ctx); err != nil {
				pool.Close()
				return nil, fmt.Errorf("pg-advisory: %w", err)
			}
			return pgAdvisoryLocker{pool}, nil
		},
	}
}

type pgAdvisoryLocker struct{ pool *pgxpool.Pool }

func (l pgAdvisoryLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	id := advisoryID(key)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
		// A cancelled wait closes the connection, and with it anything it
		// may have taken.
		conn.Release()
		return nil, err
	}
	return &pgAdvisoryHeld{conn: conn, id: id}, nil
}

func (l pgAdvisoryLocker) Close() error {
	l.pool.Close()
	return nil
}

type pgAdvisoryHeld struct {
	conn *pgxpool.Conn
	id   int64
}

func (h *pgAdvisoryHeld) Release(ctx context.Context) error {
	defer h.conn.Release()
	var ok bool
	if err := h.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", h.id).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: pg_advisory_unlock(%d) returned false", ErrNotHeld, h.id)
	}
	return nil
}

// advisoryID is the advisory lock id of key.
func advisoryID(key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int64(h.Sum64())
}
