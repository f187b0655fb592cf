package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/driver"
)

var _ driver.Inspector = (*kindView)(nil)

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
)

// kinds are the holders' kinds that make up the view's lock: both sides
// of a read-write lock.
func (v *kindView) kinds() []string {
	if v.kind == "read" || v.kind == "write" {
		return []string{"read", "write"}
	}
	return []string{v.kind}
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
	s, err := v.b.enter(ctx, 0)
	if err != nil {
		return nil, false, err
	}
	defer s.unlock()
	conn, qctx, cancel, err := s.session()
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", v.b.name, permission(err))
	}
	defer cancel()
	states, err = readHolders(qctx, conn, kindsListSQL, prefix, v.kinds(), limit+1)
	if err != nil {
		s.failed()
		return nil, false, fmt.Errorf("%s: %s list: %w", v.b.name, v.label, permission(err))
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
			owner       *string
			token, left *int64
			last        int64
		)
		if err := rows.Scan(&key, &owner, &token, &left, &last); err != nil {
			return nil, err
		}
		if len(states) == 0 || states[len(states)-1].Key != key {
			states = append(states, driver.LockState{Key: key, Token: uint64(last), Waiters: -1})
		}
		st := &states[len(states)-1]
		if owner != nil && token != nil && left != nil && *left > 0 {
			st.Held = true
			st.Holders = append(st.Holders, driver.Holder{Owner: *owner, Token: uint64(*token), TTL: time.Duration(*left) * time.Microsecond})
		}
	}
	return states, rows.Err()
}
