package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

const (
	// sqlInspect reads a name's row with the microseconds its lease has
	// left on the server's clock (negative once it has expired).
	sqlInspect = `SELECT owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM turnstile_locks WHERE name = ?`
	// sqlList reads the live leases whose names lie in [?, ?) in byte
	// order, through the primary key, ? of them at most; sqlListFrom has
	// no upper bound.
	sqlList = `SELECT name, owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM turnstile_locks
WHERE name >= ? AND name < ? AND owner <> '' AND expires_at > NOW(6) ORDER BY name LIMIT ?`
	sqlListFrom = `SELECT name, owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM turnstile_locks
WHERE name >= ? AND owner <> '' AND expires_at > NOW(6) ORDER BY name LIMIT ?`
	// sqlForce frees a row, as release.sql does, and raises its token by
	// one, so that every later token exceeds the removed holder's by two
	// at least.
	sqlForce = `UPDATE turnstile_locks SET owner = '', expires_at = NOW(6), token = token + 1 WHERE name = ?`
)

// Inspect implements driver.Inspector with one query of key's row, on
// the connection of its name's shard, and, when the row's lease is not
// live, one of the session that holds key's user lock. The store keeps
// no queue (waiters retry): Waiters is -1. Token is the row's, the last
// token issued for the name, held or not. The lock is shown as held
// while its row's lease is live, or while a session holds its user lock
// without one — a paused or removed holder that has not let go yet, or
// an account outside turnstile that took the name — as a holder whose
// owner names the connection (KILL ends it) and whose TTL is -1.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	if err := b.checkKey(key); err != nil {
		return driver.LockState{}, err
	}
	r := b.ref(key)
	ctx, s, done := b.lockShard(ctx, r.name)
	defer done()
	c, err := s.get(ctx)
	if err != nil {
		return driver.LockState{}, fmt.Errorf("%s: inspect %q: %w", b.name, key, err)
	}
	st, err := readState(ctx, c.QueryRowContext, sqlInspect, key, r.name)
	if err == nil && !st.Held {
		st, err = inspectOutside(ctx, c, key, r, st)
	}
	if err != nil {
		return driver.LockState{}, fmt.Errorf("%s: inspect %q: %w", b.name, key, s.fail(err))
	}
	return st, nil
}

// readState reads key's state with q (sqlInspect, or it FOR UPDATE).
func readState(ctx context.Context, query func(context.Context, string, ...any) *sql.Row, q, key, name string) (driver.LockState, error) {
	st := driver.LockState{Key: key, Waiters: -1}
	var (
		owner string
		token uint64
		left  int64
	)
	err := query(ctx, q, name).Scan(&owner, &token, &left)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return driver.LockState{}, err
	}
	st.Token = token
	if owner != "" && left > 0 {
		st.Held = true
		st.Holders = []driver.Holder{{Owner: owner, Token: token, TTL: time.Duration(left) * time.Microsecond}}
	}
	return st, nil
}

// List implements driver.Inspector with one range query on the primary
// key: the names from prefix up to the first byte string past every name
// that starts with prefix, skipping free and expired rows, limit+1 rows
// at most. Rows stay for every name ever locked, so the scan reads every
// row under prefix, held or not, until it has found limit+1 held ones:
// its cost grows with the names under prefix, not with the table.
//
// Keys longer than 64 bytes, and keys that start with "ts:", are stored
// under their names (LockName: "ts:" and a hash), and List returns those
// names as their keys; only a prefix of the name finds them, and a prefix
// longer than 64 bytes is refused, since no name is that long.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: %s: list limit %d must be positive", turnstile.ErrInvalidOption, b.name, limit)
	}
	if len(prefix) > maxNameLen {
		return nil, false, fmt.Errorf("%w: %s: list prefix is %d bytes; keys longer than %d bytes are stored under hashed names (see LockName), so no longer prefix can match", turnstile.ErrInvalidKey, b.name, len(prefix), maxNameLen)
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	ctx, s, done := b.lockShard(ctx, prefix)
	defer done()
	c, err := s.get(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, err)
	}
	var rows *sql.Rows
	if end, ok := successor([]byte(prefix)); ok {
		rows, err = c.QueryContext(ctx, sqlList, []byte(prefix), end, limit+1)
	} else {
		rows, err = c.QueryContext(ctx, sqlListFrom, []byte(prefix), limit+1)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, s.fail(err))
	}
	defer rows.Close()
	var out []driver.LockState
	for rows.Next() {
		var (
			name, owner string
			token       uint64
			left        int64
		)
		if err := rows.Scan(&name, &owner, &token, &left); err != nil {
			return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, err)
		}
		out = append(out, driver.LockState{
			Key: name, Held: true, Token: token, Waiters: -1,
			Holders: []driver.Holder{{Owner: owner, Token: token, TTL: time.Duration(left) * time.Microsecond}},
		})
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, s.fail(err))
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// successor returns the least byte string greater than every string that
// starts with prefix: prefix with its last byte raised by one, after
// dropping trailing 0xFF bytes. ok is false when there is none (an empty
// prefix, or one of 0xFF bytes only).
func successor(prefix []byte) ([]byte, bool) {
	end := append([]byte(nil), prefix...)
	for len(end) > 0 {
		if end[len(end)-1] < 0xFF {
			end[len(end)-1]++
			return end, true
		}
		end = end[:len(end)-1]
	}
	return nil, false
}

// ForceRelease implements driver.ForceReleaser with one transaction on
// the connection of the name's shard: it locks and reads the name's row,
// then frees it and raises its token by one. The returned Token is the
// raised token: above the removed holder's, below every later one.
//
// The holder's user lock stays with its session until its Backend lets
// go of it: at its next renewal, which finds the row freed and reports
// the lock lost, or at its local deadline (the sweeper). Until then other
// Backends still cannot take the key; a holder whose process died lost
// its user lock with its session. When the holder is this Backend, its
// user lock goes at once. The store sends no release notices: waiters
// find the lock free at their next attempt.
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	if err := b.checkKey(key); err != nil {
		return driver.LockState{}, err
	}
	name := LockName(key)
	ctx, s, done := b.lockShard(ctx, name)
	defer done()
	c, err := s.get(ctx)
	if err != nil {
		return driver.LockState{}, fmt.Errorf("%s: force release %q: %w", b.name, key, err)
	}
	st, err := forceRelease(ctx, c, key, name)
	if err != nil {
		return driver.LockState{}, fmt.Errorf("%s: force release %q: %w", b.name, key, s.fail(err))
	}
	if _, ok := s.held[name]; ok {
		s.drop(ctx, name)
	}
	return st, nil
}

func forceRelease(ctx context.Context, c *sql.Conn, key, name string) (driver.LockState, error) {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return driver.LockState{}, err
	}
	defer func() { _ = tx.Rollback() }()
	st, err := readState(ctx, tx.QueryRowContext, sqlInspect+" FOR UPDATE", key, name)
	if err != nil {
		return driver.LockState{}, err
	}
	if st.Token == 0 {
		return st, tx.Commit() // no row: no token was ever issued for the name
	}
	if _, err := tx.ExecContext(ctx, sqlForce, name); err != nil {
		return driver.LockState{}, err
	}
	st.Token++
	return st, tx.Commit()
}
