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

// The lock kinds, for turnstile.Reentrant, turnstile.Semaphore and
// turnstile.ReadWrite, which check their settings and hand them here.
// There is no fair view: the store keeps no queue of
// waiters, so turnstile.Fair refuses a postgres Backend.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
)

// kindView is a lock kind on a Backend. Its holds are rows of table
// turnstile_holds, one per holder, whose expiry on the server's clock is
// the lease's TTL; no advisory lock is taken, so a kind's lease holds
// exactly as long as its row lives, as on the stores that have only TTLs.
// The kinds' locks are apart from the plain lock's: a plain lock and a
// reentrant lock on one key do not exclude each other, but they share the
// key's fencing tokens.
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

// ReentrantView implements driver.Reentranter: a lock that the owner
// holding it may take again, and holds until it released it as often.
// Every re-entry returns the token of the first acquisition and renews
// the hold to at least its TTL.
func (b *Backend) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	return &kindView{b, sqlkinds.Reentrant()}, nil
}

// SemaphoreView implements driver.Semaphorer: up to cfg.Permits owners
// hold a key at once, each lease one permit with a token of its own. The
// number is stored in every holder's row; while a permit of the key is
// held, an acquisition with another number is refused
// (turnstile.ErrInvalidOption).
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return &kindView{b, sqlkinds.Semaphore(cfg)}, nil
}

// ReadWriteView implements driver.ReadWriter: the two sides of a
// read-write lock, any number of readers or one writer. Writers are
// preferred: a writer that finds the key held leaves a claim, and while a
// claim is live no new reader gets in, so a stream of readers cannot
// starve writers. A claim lasts cfg.Claim() after the writer's last
// attempt, so a writer that gave up blocks new readers for at most that
// long. The read side is driver.Shared.
func (b *Backend) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	r, w := sqlkinds.ReadWrite(cfg)
	return &kindView{b, r}, &kindView{b, w}, nil
}

// Name implements driver.Namer.
func (v *kindView) Name() string { return v.b.Name() + " " + v.Label }

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
