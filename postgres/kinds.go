package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/sqlkinds"
)

//go:embed kinds.sql
var kindsSQL string

const (
	holdAcquireSQL = "SELECT tok, stored FROM turnstile_hold_acquire($1, $2, $3, $4, $5, $6)"
	holdReleaseSQL = "SELECT turnstile_hold_release($1, $2, $3)"
	// A reentrant hold is renewed to at least ttl from now, never cut
	// short: each of the owner's leases is renewed on its own schedule.
	holdExtendSQL = `UPDATE turnstile_holds
SET expires_at = CASE WHEN kind = 'reentrant' THEN greatest(expires_at, clock_timestamp() + $4 * interval '1 millisecond')
	ELSE clock_timestamp() + $4 * interval '1 millisecond' END
WHERE key = $1 AND kind = $2 AND owner = $3 AND expires_at > clock_timestamp()`
)

// kindView is a lock kind on a Backend (sqlkinds.Spec has what a hold
// is). Each call is one statement or function of kinds.sql on the key's
// lock connection; no advisory lock is taken.
type kindView struct {
	b *Backend
	sqlkinds.Spec
}

var (
	_ driver.Backend  = (*kindView)(nil)
	_ driver.Notifier = (*kindView)(nil)
	_ driver.Namer    = (*kindView)(nil)
	_ driver.Shared   = (*kindView)(nil)
)

// Released implements driver.Notifier: the view's releases are notified
// on the plain lock's channel.
func (v *kindView) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return v.b.Released(ctx, key)
}

// do runs fn on the lock connection of key.
func (v *kindView) do(ctx context.Context, key, what string, fn func(ctx context.Context, q *pgx.Conn) error) error {
	s, conn, qctx, done, err := v.b.open(ctx, v.b.lockID(key))
	if err != nil {
		return err
	}
	defer done()
	if err := fn(qctx, conn); err != nil {
		s.failed()
		return fmt.Errorf("%s: %s %s: %w", v.b.name, v.Label, what, permission(err))
	}
	return nil
}

// Acquire implements driver.Backend.
func (v *kindView) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := sqlkinds.CheckLease(ctx, "postgres", key, owner, ttl, time.Millisecond); err != nil {
		return 0, false, err
	}
	var tok *int64
	var stored *int32
	err := v.do(ctx, key, "acquire", func(ctx context.Context, q *pgx.Conn) error {
		return q.QueryRow(ctx, holdAcquireSQL, key, v.Kind, owner, ttl.Milliseconds(), v.Permits, v.Claim.Milliseconds()).Scan(&tok, &stored)
	})
	if err != nil {
		return 0, false, err
	}
	if stored != nil {
		return 0, false, fmt.Errorf("%w: semaphore %q is held with %d permits, not %d", turnstile.ErrInvalidOption, key, *stored, v.Permits)
	}
	if tok == nil {
		return 0, false, nil
	}
	return uint64(*tok), true, nil
}

// Extend implements driver.Backend: it renews owner's hold.
func (v *kindView) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := sqlkinds.CheckLease(ctx, "postgres", key, owner, ttl, time.Millisecond); err != nil {
		return false, err
	}
	var n int64
	err := v.do(ctx, key, "extend", func(ctx context.Context, q *pgx.Conn) error {
		tag, err := q.Exec(ctx, holdExtendSQL, key, v.Kind, owner, ttl.Milliseconds())
		n = tag.RowsAffected()
		return err
	})
	return n == 1, err
}

// Release implements driver.Backend: it takes back one acquisition of
// owner's hold, and returns ok=false if owner holds none.
func (v *kindView) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := sqlkinds.CheckOwner(ctx, "postgres", key, owner); err != nil {
		return false, err
	}
	var held bool
	err := v.do(ctx, key, "release", func(ctx context.Context, q *pgx.Conn) error {
		return q.QueryRow(ctx, holdReleaseSQL, key, v.Kind, owner).Scan(&held)
	})
	return held, err
}
