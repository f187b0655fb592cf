package peers

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// getLockTimeout is the timeout, in seconds, each GET_LOCK call waits
// before it returns 0 and Acquire calls it again: long against a cell,
// so that a waiter waits in the server, as with pg_advisory_lock.
const getLockTimeout = 10

// maxLockName is the longest name GET_LOCK takes on MySQL 5.7+ and
// MariaDB.
const maxLockName = 64

// MySQLGetLock is MySQL's (and MariaDB's) own lock, the named user lock,
// as its users run it: database/sql over go-sql-driver/mysql with a pool
// of one connection per worker; a lock takes a connection from the pool
// (sql.DB.Conn), runs GET_LOCK(key, 10) on it, which waits in the server
// up to 10 s (and is called again after), and RELEASE_LOCK(key) on the
// same connection to release it, then returns the connection. The lock
// is the session's: a connection that dies frees it.
func MySQLGetLock(user, password, database string) workload.Library {
	return workload.Library{
		Name:     "mysql-get-lock",
		Settings: fmt.Sprintf("mysql-get-lock: GET_LOCK(key, %d) and RELEASE_LOCK(key) on a connection held from a database/sql pool (go-sql-driver/mysql) of one connection per worker", getLockTimeout),
		Open: func(ctx context.Context, addrs []string, workers int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: mysql-get-lock takes one server, not %d", workload.ErrUsage, len(addrs))
			}
			cfg := mysql.NewConfig()
			cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", addrs[0], database
			conn, err := mysql.NewConnector(cfg)
			if err != nil {
				return nil, fmt.Errorf("mysql-get-lock: %w", err)
			}
			db := sql.OpenDB(conn)
			db.SetMaxOpenConns(max(workers, 1))
			db.SetMaxIdleConns(max(workers, 1))
			if err := db.PingContext(ctx); err != nil {
				_ = db.Close()
				return nil, fmt.Errorf("mysql-get-lock: %w", err)
			}
			return getLockLocker{db}, nil
		},
	}
}

type getLockLocker struct{ db *sql.DB }

func (l getLockLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	if len(key) > maxLockName {
		return nil, fmt.Errorf("%w: mysql-get-lock: key of %d bytes, GET_LOCK takes at most %d", workload.ErrUsage, len(key), maxLockName)
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for {
		var got sql.NullInt64
		// A cancelled wait closes the connection, and with it anything it
		// may have taken.
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", key, getLockTimeout).Scan(&got); err != nil {
			_ = conn.Close()
			return nil, err
		}
		switch {
		case got.Valid && got.Int64 == 1:
			return &getLockHeld{conn: conn, key: key}, nil
		case !got.Valid:
			_ = conn.Close()
			return nil, fmt.Errorf("mysql-get-lock: GET_LOCK(%q) returned NULL", key)
		}
		if err := ctx.Err(); err != nil { // 0: timed out; wait again
			_ = conn.Close()
			return nil, err
		}
	}
}

func (l getLockLocker) Close() error { return l.db.Close() }

type getLockHeld struct {
	conn *sql.Conn
	key  string
}

func (h *getLockHeld) Release(ctx context.Context) error {
	defer h.conn.Close()
	var ok sql.NullInt64
	if err := h.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", h.key).Scan(&ok); err != nil {
		return err
	}
	if !ok.Valid || ok.Int64 != 1 {
		return fmt.Errorf("%w: RELEASE_LOCK(%q) returned %v", ErrNotHeld, h.key, ok)
	}
	return nil
}
