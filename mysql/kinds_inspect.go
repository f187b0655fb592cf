package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/sqlkinds"
)

var (
	_ driver.Inspector     = (*kindView)(nil)
	_ driver.ForceReleaser = (*kindView)(nil)
)

const (
	// The live holders of a name in two kinds, and the name's last
	// token; no row when the name was never locked.
	sqlKindsInspect = `SELECT l.name, h.owner, h.token, TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expires_at), l.token
FROM turnstile_locks l LEFT JOIN turnstile_holds h
	ON h.name = l.name AND h.kind IN (?, ?) AND h.expires_at > NOW(6)
WHERE l.name = ?`
	// The live holders in two kinds of the first names in [?, ?) (no
	// upper bound when the first ? is true), in byte order through the
	// primary key. The table keeps live holders only, so the scan's cost
	// grows with the holders, not with the names ever locked.
	sqlKindsList = `SELECT h.name, h.owner, h.token, TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expires_at), l.token
FROM (SELECT DISTINCT name FROM turnstile_holds
	WHERE name >= ? AND (? OR name < ?) AND kind IN (?, ?) AND expires_at > NOW(6) ORDER BY name LIMIT ?) ks
JOIN turnstile_holds h ON h.name = ks.name JOIN turnstile_locks l ON l.name = ks.name
WHERE h.kind IN (?, ?) AND h.expires_at > NOW(6) ORDER BY h.name`

	// sqlKindsForceLock locks a name's fence row, which every
	// acquisition of the name's kinds locks too, for a forced release,
	// and reads its last token.
	sqlKindsForceLock = `SELECT token FROM turnstile_locks WHERE name = ? FOR UPDATE`
	// sqlKindsForceHolders are the live holders of a name in two kinds,
	// with their time left.
	sqlKindsForceHolders = `SELECT owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM turnstile_holds
WHERE name = ? AND kind IN (?, ?) AND expires_at > NOW(6)`
	// sqlKindsForce deletes the holds of a name in two kinds, live or
	// expired. Waiting writers' claims stay.
	sqlKindsForce = `DELETE FROM turnstile_holds WHERE name = ? AND kind IN (?, ?)`
	// sqlKindsFloor raises a name's token by one: the floor, above every
	// removed holder's token; the next token is above it.
	sqlKindsFloor = `UPDATE turnstile_locks SET token = token + 1 WHERE name = ?`
)

// noSuchTable is the server's error for a table that does not exist
// (ER_NO_SUCH_TABLE): turnstile_holds before any kind was used, so
// nothing is held in a kind.
const noSuchTable = 1146

// noKinds reports whether err says turnstile_holds does not exist.
func noKinds(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == noSuchTable
}

// kinds are the two holders' kinds that make up the view's lock: both
// sides of a read-write lock, or the view's kind twice.
func (v *kindView) kinds() (string, string) {
	if v.Kind == "read" || v.Kind == "write" {
		return "read", "write"
	}
	return v.Kind, v.Kind
}

// Inspect implements driver.Inspector with one query: the key's live
// holders of the view's kind (readers and writer alike for either side
// of a read-write lock), each with its token and time left on the
// server's clock. Token is the name's last token, of any kind; the store
// keeps no queue, so Waiters is -1. It creates nothing: before the
// kinds' table exists, nothing is held in a kind.
func (v *kindView) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	name := LockName(key)
	k1, k2 := v.kinds()
	var states []driver.LockState
	err := v.read(ctx, name, "inspect", func(ctx context.Context, c *sql.Conn) error {
		var err error
		states, err = readHolders(c.QueryContext(ctx, sqlKindsInspect, k1, k2, name))
		return err
	})
	if err != nil {
		return driver.LockState{}, err
	}
	st := driver.LockState{Key: key, Waiters: -1}
	if len(states) > 0 {
		st.Held, st.Holders, st.Token = states[0].Held, states[0].Holders, states[0].Token
	}
	return st, nil
}

// List implements driver.Inspector with one query over the holders of
// the view's kind whose lock names start with prefix; as for the plain
// lock, keys longer than 64 bytes are listed under their hashed names.
func (v *kindView) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: %s: list limit %d must be positive", turnstile.ErrInvalidOption, v.Name(), limit)
	}
	if len(prefix) > maxNameLen {
		return nil, false, fmt.Errorf("%w: %s: list prefix is %d bytes; keys longer than %d bytes are stored under hashed names (see LockName), so no longer prefix can match", turnstile.ErrInvalidKey, v.Name(), len(prefix), maxNameLen)
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	end, bounded := successor([]byte(prefix))
	k1, k2 := v.kinds()
	var states []driver.LockState
	err := v.read(ctx, prefix, "list", func(ctx context.Context, c *sql.Conn) error {
		var err error
		states, err = readHolders(c.QueryContext(ctx, sqlKindsList, []byte(prefix), !bounded, end, k1, k2, limit+1, k1, k2))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if len(states) > limit {
		return states[:limit], true, nil
	}
	return states, false, nil
}

// readHolders gathers rows (name, owner, token, µs left, name's token)
// into one state per name, in the order of the rows.
func readHolders(rows *sql.Rows, err error) ([]driver.LockState, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var states []driver.LockState
	for rows.Next() {
		var (
			name  string
			owner sql.NullString
			token sql.Null[uint64]
			left  sql.NullInt64
			last  uint64
		)
		if err := rows.Scan(&name, &owner, &token, &left, &last); err != nil {
			return nil, err
		}
		h := driver.Holder{Owner: owner.String, Token: token.V, TTL: time.Duration(left.Int64) * time.Microsecond}
		states = sqlkinds.AddRow(states, name, last, h, owner.Valid && token.Valid && left.Valid && left.Int64 > 0)
	}
	return states, rows.Err()
}

// read runs fn on the connection of name, as conn does, without creating
// turnstile_holds: an operator's read needs no CREATE privilege, and a
// missing table holds nothing.
func (v *kindView) read(ctx context.Context, name, what string, fn func(ctx context.Context, c *sql.Conn) error) error {
	ctx, s, done := v.b.lockShard(ctx, name)
	defer done()
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	if err := fn(ctx, c); err != nil && !noKinds(err) {
		return fmt.Errorf("%s: %s %s: %w", v.b.name, v.Label, what, s.fail(err))
	}
	return nil
}

// ForceRelease implements driver.ForceReleaser with one transaction on
// the connection of the name's shard: it locks the name's fence row, so
// that no acquisition of the key runs meanwhile, reads and deletes every
// hold of the view's kind (readers and writer alike for either side of
// a read-write lock), and when one was live raises the row's token by
// one. The holders' next Extend finds their rows gone and reports the
// hold lost; waiters find the key free at their next attempt (the store
// sends no release notices). The returned Token is the raised token (the
// last token when nothing was held).
func (v *kindView) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	name := LockName(key)
	st := driver.LockState{Key: key, Waiters: -1}
	err := v.read(ctx, name, "force release", func(ctx context.Context, c *sql.Conn) error {
		tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if st, err = v.forceRelease(ctx, tx, key, name); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return driver.LockState{}, err
	}
	return st, nil
}

func (v *kindView) forceRelease(ctx context.Context, tx *sql.Tx, key, name string) (driver.LockState, error) {
	st := driver.LockState{Key: key, Waiters: -1}
	err := tx.QueryRowContext(ctx, sqlKindsForceLock, name).Scan(&st.Token)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil // no row: nothing was ever held on the name
	}
	if err != nil {
		return st, err
	}
	k1, k2 := v.kinds()
	rows, err := tx.QueryContext(ctx, sqlKindsForceHolders, name, k1, k2)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			h    driver.Holder
			left int64
		)
		if err := rows.Scan(&h.Owner, &h.Token, &left); err != nil {
			return st, err
		}
		if left > 0 {
			h.TTL = time.Duration(left) * time.Microsecond
			st.Held, st.Holders = true, append(st.Holders, h)
		}
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if _, err := tx.ExecContext(ctx, sqlKindsForce, name, k1, k2); err != nil {
		return st, err
	}
	if st.Held {
		if _, err := tx.ExecContext(ctx, sqlKindsFloor, name); err != nil {
			return st, err
		}
		st.Token++
	}
	return st, nil
}
