package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

const (
	// inspectSQL reads key's row with the time its lease has left on the
	// server's clock, NULL when it is free or expired.
	inspectSQL = `SELECT owner, token,
	CASE WHEN owner <> '' AND expires_at > c.t THEN (extract(epoch FROM expires_at - c.t) * 1000000)::bigint END
FROM turnstile_locks, (SELECT clock_timestamp() AS t) AS c
WHERE key = $1`

	// listSQL reads the live leases whose keys lie in [$1, $2) in byte
	// order (code point order: the keys are UTF-8), $3 of them at most,
	// through the index turnstile_locks_key_c; listFromSQL has no upper
	// bound.
	listSQL = `SELECT key, owner, token, (extract(epoch FROM expires_at - c.t) * 1000000)::bigint
FROM turnstile_locks, (SELECT clock_timestamp() AS t) AS c
WHERE key COLLATE "C" >= $1 AND key COLLATE "C" < $2 AND owner <> '' AND expires_at > c.t
ORDER BY key COLLATE "C" LIMIT $3`
	listFromSQL = `SELECT key, owner, token, (extract(epoch FROM expires_at - c.t) * 1000000)::bigint
FROM turnstile_locks, (SELECT clock_timestamp() AS t) AS c
WHERE key COLLATE "C" >= $1 AND owner <> '' AND expires_at > c.t
ORDER BY key COLLATE "C" LIMIT $2`

	// forceLockSQL locks key's row for the forced release and reads it.
	forceLockSQL = inspectSQL + ` FOR UPDATE OF turnstile_locks`
	// forceSQL frees the row and raises its token by one, so that the next
	// token is at least two above the removed holder's. It returns the
	// raised token: the floor.
	forceSQL = `UPDATE turnstile_locks SET owner = '', expires_at = '-infinity', token = token + 1
WHERE key = $1 RETURNING token`
	// notifySQL tells waiters, when the transaction commits, as a release
	// does.
	notifySQL = `SELECT pg_notify('turnstile_released', $1)`
	// fenceTableSQL tells whether fence.Postgres's default table exists.
	fenceTableSQL = `SELECT to_regclass('turnstile_fences') IS NOT NULL`
	// fenceSQL raises the fence of resource key to the floor, so that the
	// removed holder's fenced writes are refused even by a guard that
	// accepts a token equal to the last one.
	fenceSQL = `INSERT INTO turnstile_fences AS f (resource, token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at
WHERE f.token < EXCLUDED.token`
)

// Inspect implements driver.Inspector with one query of key's row, on
// the lock connection of key's shard, and, when the row's lease is not
// live, one of the session holding key's advisory lock (inspectOutside):
// such a session is shown as the holder, TTL -1. The store keeps no queue
// (waiters retry, woken by release notices): Waiters is -1. Token is the
// row's, the last token issued for key, held or not.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	if err := b.checkKey(key); err != nil {
		return driver.LockState{}, err
	}
	id := b.lockID(key)
	s, conn, qctx, done, err := b.open(ctx, id)
	if err != nil {
		return driver.LockState{}, err
	}
	defer done()
	st, err := readState(qctx, conn, inspectSQL, key)
	if err == nil && !st.Held {
		st, err = inspectOutside(qctx, conn, key, id, st)
	}
	if err != nil {
		s.failed()
		return driver.LockState{}, fmt.Errorf("%s: inspect %q: %w", b.name, key, permission(err))
	}
	return st, nil
}

// readState reads key's state with q (inspectSQL or forceLockSQL).
func readState(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, q, key string) (driver.LockState, error) {
	st := driver.LockState{Key: key, Waiters: -1}
	var (
		owner string
		token int64
		left  *int64
	)
	err := db.QueryRow(ctx, q, key).Scan(&owner, &token, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return driver.LockState{}, err
	}
	st.Token = uint64(token)
	if left != nil && *left > 0 {
		st.Held = true
		st.Holders = []driver.Holder{{Owner: owner, Token: uint64(token), TTL: time.Duration(*left) * time.Microsecond}}
	}
	return st, nil
}

// List implements driver.Inspector with one range query: the keys from
// prefix up to the first string past every key that starts with prefix,
// in byte order, through the index turnstile_locks_key_c (created by
// Dial), skipping free and expired rows, limit+1 rows at most. Rows
// stay for every key ever locked, so the scan reads every row under
// prefix, held or not, until it has found limit+1 held ones: its cost
// grows with the keys under prefix, not with the table.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: %s: list limit %d must be positive", turnstile.ErrInvalidOption, b.name, limit)
	}
	if !utf8.ValidString(prefix) {
		return nil, false, fmt.Errorf("%w: %s: list prefix %q is not valid UTF-8, which no key stored in PostgreSQL can start with", turnstile.ErrInvalidKey, b.name, prefix)
	}
	s, conn, qctx, done, err := b.open(ctx, b.lockID(prefix))
	if err != nil {
		return nil, false, err
	}
	defer done()
	var rows pgx.Rows
	if end, ok := successor(prefix); ok {
		rows, err = conn.Query(qctx, listSQL, prefix, end, limit+1)
	} else {
		rows, err = conn.Query(qctx, listFromSQL, prefix, limit+1)
	}
	if err != nil {
		s.failed()
		return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, permission(err))
	}
	var out []driver.LockState
	for rows.Next() {
		var (
			key, owner string
			token      int64
			left       int64
		)
		if err := rows.Scan(&key, &owner, &token, &left); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, permission(err))
		}
		out = append(out, driver.LockState{
			Key: key, Held: true, Token: uint64(token), Waiters: -1,
			Holders: []driver.Holder{{Owner: owner, Token: uint64(token), TTL: time.Duration(left) * time.Microsecond}},
		})
	}
	if err := rows.Err(); err != nil {
		s.failed()
		return nil, false, fmt.Errorf("%s: list %q: %w", b.name, prefix, permission(err))
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// successor returns the least string greater than every string that
// starts with prefix, in code point order: prefix with its last code
// point raised by one, after dropping trailing U+10FFFF. ok is false
// when there is none (an empty prefix, or one of U+10FFFF only).
func successor(prefix string) (string, bool) {
	rs := []rune(prefix)
	for len(rs) > 0 {
		r := rs[len(rs)-1] + 1
		if r == 0xD800 {
			r = 0xE000 // surrogates are no characters: next is U+E000
		}
		if r <= utf8.MaxRune {
			rs[len(rs)-1] = r
			return string(rs), true
		}
		rs = rs[:len(rs)-1]
	}
	return "", false
}

// ForceRelease implements driver.ForceReleaser with one transaction on
// the lock connection of key's shard: it locks and reads key's row, frees
// it and raises its token by one (every later token exceeds the removed
// holder's by two at least), sends the release notice waiters listen for,
// and, when fence.Postgres's table turnstile_fences exists in the
// database, raises the fence of the resource named like the key to the
// raised token, so that the removed holder's late writes through that
// guard are refused, even by one that accepts a token equal to the last.
// The returned Token is the raised token.
//
// The holder's advisory lock stays with its session until its Backend
// lets go of it: at its next renewal, which finds the row freed and
// reports the lock lost, or at its local deadline. Until then other
// Backends still cannot take key; a holder whose process died lost its
// advisory lock with its session. When the holder is this Backend, the
// advisory lock goes at once.
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := b.checkKey(key); err != nil {
		return driver.LockState{}, err
	}
	hash := b.lockID(key)
	s, conn, qctx, done, err := b.open(ctx, hash)
	if err != nil {
		return driver.LockState{}, err
	}
	defer done()
	st, err := forceRelease(qctx, conn, key)
	if err != nil {
		s.failed()
		return driver.LockState{}, fmt.Errorf("%s: force release %q: %w", b.name, key, permission(err))
	}
	if h := s.held[key]; h != nil {
		h.timer.Stop()
		delete(s.held, key)
		if h.gen == s.gen {
			if _, err := conn.Exec(qctx, expireSQL, h.hash, key); err != nil {
				s.failed()
			}
		}
	}
	return st, nil
}

func forceRelease(ctx context.Context, conn *pgx.Conn, key string) (driver.LockState, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return driver.LockState{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	st, err := readState(ctx, tx, forceLockSQL, key)
	if err != nil {
		return driver.LockState{}, err
	}
	if st.Token == 0 {
		return st, tx.Commit(ctx) // no row: no token was ever issued for key
	}
	var (
		floor  int64
		fenced bool
	)
	if err := tx.QueryRow(ctx, forceSQL, key).Scan(&floor); err != nil {
		return driver.LockState{}, err
	}
	if st.Held {
		if _, err := tx.Exec(ctx, notifySQL, key); err != nil {
			return driver.LockState{}, err
		}
	}
	st.Token = uint64(floor)
	if err := tx.QueryRow(ctx, fenceTableSQL).Scan(&fenced); err != nil {
		return driver.LockState{}, err
	}
	if fenced {
		if _, err := tx.Exec(ctx, fenceSQL, key, floor); err != nil {
			return driver.LockState{}, fmt.Errorf("raise the fence in turnstile_fences: %w", err)
		}
	}
	return st, tx.Commit(ctx)
}
