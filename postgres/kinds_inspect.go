package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/sqlkinds"
)

var (
	_ driver.Inspector     = (*kindView)(nil)
	_ driver.ForceReleaser = (*kindView)(nil)
)

const (
	// The live holders of key in the given kinds, and the key's last
	// token; no row when the key was never locked.
	kindsInspectSQL = `SELECT l.key, h.owner, h.token, (extract(epoch FROM h.expires_at - clock_timestamp()) * 1000000)::bigint, l.token
FROM turnstile_locks l LEFT JOIN turnstile_holds h
	ON h.key = l.key AND h.kind = ANY($2) AND h.expires_at > clock_timestamp()
WHERE l.key = $1`
	// The live holders of the first $3 keys under prefix $1 in the given
	// kinds. The table keeps live holders only (a release deletes its
	// row, an acquisition the key's expired ones), so the scan's cost
	// grows with the holders, not with the keys ever locked.
	kindsListSQL = `WITH ks AS (
	SELECT DISTINCT key FROM turnstile_holds
	WHERE starts_with(key, $1) AND kind = ANY($2) AND expires_at > clock_timestamp()
	ORDER BY key LIMIT $3)
SELECT l.key, h.owner, h.token, (extract(epoch FROM h.expires_at - clock_timestamp()) * 1000000)::bigint, l.token
FROM ks JOIN turnstile_holds h ON h.key = ks.key JOIN turnstile_locks l ON l.key = ks.key
WHERE h.kind = ANY($2) AND h.expires_at > clock_timestamp()
ORDER BY l.key`

	// kindsForceLockSQL locks key's fence row, which every acquisition
	// of the key's kinds locks too, for a forced release, and reads its
	// last token.
	kindsForceLockSQL = `SELECT token FROM turnstile_locks WHERE key = $1 FOR UPDATE`
	// kindsForceSQL deletes the holds of the given kinds, returning each
	// with its time left (live holds only are holders; the others had
	// expired). Waiting writers' claims stay.
	kindsForceSQL = `DELETE FROM turnstile_holds WHERE key = $1 AND kind = ANY($2)
RETURNING owner, token, (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint`
	// kindsFloorSQL raises key's token by one: the floor, above every
	// removed holder's token; the next token is above it.
	kindsFloorSQL = `UPDATE turnstile_locks SET token = token + 1 WHERE key = $1 RETURNING token`
)

// kinds are the holders' kinds that make up the view's lock: both sides
// of a read-write lock.
func (v *kindView) kinds() []string {
	if v.Kind == "read" || v.Kind == "write" {
		return []string{"read", "write"}
	}
	return []string{v.Kind}
}

// Inspect implements driver.Inspector with one query: the key's live
// holders of the view's kind (readers and writer alike for either side
// of a read-write lock), each with its token and time left on the
// server's clock. Token is the key's last token, of any kind; the store
// keeps no queue, so Waiters is -1.
func (v *kindView) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	var states []driver.LockState
	err := v.do(ctx, key, "inspect", func(ctx context.Context, q *pgx.Conn) error {
		var err error
		states, err = readHolders(ctx, q, kindsInspectSQL, key, v.kinds())
		return err
	})
	if err != nil {
		return driver.LockState{}, err
	}
	if len(states) == 0 {
		return driver.LockState{Key: key, Waiters: -1}, nil
	}
	return states[0], nil
}

// List implements driver.Inspector with one query over the holders of
// the view's kind under prefix.
func (v *kindView) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("%s: list: limit %d is not positive", v.b.name, limit)
	}
	var states []driver.LockState
	// Any lock connection serves: the first.
	s, conn, qctx, done, err := v.b.open(ctx, 0)
	if err != nil {
		return nil, false, err
	}
	defer done()
	states, err = readHolders(qctx, conn, kindsListSQL, prefix, v.kinds(), limit+1)
	if err != nil {
		s.failed()
		return nil, false, fmt.Errorf("%s: %s list: %w", v.b.name, v.Label, permission(err))
	}
	if len(states) > limit {
		return states[:limit], true, nil
	}
	return states, false, nil
}

// readHolders runs q and gathers its rows (key, owner, token, µs left,
// key's token) into one state per key, in the order of the rows.
func readHolders(ctx context.Context, conn *pgx.Conn, q string, args ...any) ([]driver.LockState, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var states []driver.LockState
	for rows.Next() {
		var (
			key         string
			owner       sql.NullString
			token, left sql.NullInt64
			last        int64
		)
		if err := rows.Scan(&key, &owner, &token, &left, &last); err != nil {
			return nil, err
		}
		h := driver.Holder{Owner: owner.String, Token: uint64(token.Int64), TTL: time.Duration(left.Int64) * time.Microsecond}
		states = sqlkinds.AddRow(states, key, uint64(last), h, owner.Valid && token.Valid && left.Valid && left.Int64 > 0)
	}
	return states, rows.Err()
}

// ForceRelease implements driver.ForceReleaser with one transaction on
// the lock connection of key: it locks key's fence row, so that no
// acquisition of the key runs meanwhile, deletes every hold of the
// view's kind (readers and writer alike for either side of a read-write
// lock), and when one was live raises the row's token by one, sends the
// release notice waiters listen for and raises the fence of the
// resource named like the key in turnstile_fences, if that table
// exists, as Backend.ForceRelease does. The holders' next Extend finds
// their rows gone and reports the hold lost. The returned Token is the
// raised token (the last token when nothing was held).
func (v *kindView) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	st := driver.LockState{Key: key, Waiters: -1}
	err := v.do(ctx, key, "force release", func(ctx context.Context, q *pgx.Conn) error {
		var err error
		st, err = v.forceRelease(ctx, q, key)
		return err
	})
	if err != nil {
		return driver.LockState{}, err
	}
	return st, nil
}

func (v *kindView) forceRelease(ctx context.Context, conn *pgx.Conn, key string) (driver.LockState, error) {
	st := driver.LockState{Key: key, Waiters: -1}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return st, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var last int64
	err = tx.QueryRow(ctx, kindsForceLockSQL, key).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, tx.Commit(ctx) // no row: nothing was ever held on key
	}
	if err != nil {
		return st, err
	}
	st.Token = uint64(last)
	rows, err := tx.Query(ctx, kindsForceSQL, key, v.kinds())
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var (
			owner       string
			token, left int64
		)
		if err := rows.Scan(&owner, &token, &left); err != nil {
			rows.Close()
			return st, err
		}
		if left > 0 {
			st.Held = true
			st.Holders = append(st.Holders, driver.Holder{Owner: owner, Token: uint64(token), TTL: time.Duration(left) * time.Microsecond})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, err
	}
	if st.Held {
		var floor int64
		if err := tx.QueryRow(ctx, kindsFloorSQL, key).Scan(&floor); err != nil {
			return st, err
		}
		st.Token = uint64(floor)
		if _, err := tx.Exec(ctx, notifySQL, key); err != nil {
			return st, err
		}
		var fenced bool
		if err := tx.QueryRow(ctx, fenceTableSQL).Scan(&fenced); err != nil {
			return st, err
		}
		if fenced {
			if _, err := tx.Exec(ctx, fenceSQL, key, floor); err != nil {
				return st, fmt.Errorf("raise the fence in turnstile_fences: %w", err)
			}
		}
	}
	return st, tx.Commit(ctx)
}
