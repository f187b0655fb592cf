package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/sqlkinds"
)

//go:embed sql/kinds_schema.sql
var sqlKindsSchema string

const (
	// The name's fence row, made if missing (free), and locked for the
	// transaction: it serialises the acquisitions of the name.
	sqlKindsFence = `INSERT INTO turnstile_locks (name, token, owner, expires_at) VALUES (?, 0, '', NOW(6))
ON DUPLICATE KEY UPDATE token = token`
	sqlKindsPrune   = `DELETE FROM turnstile_holds WHERE name = ? AND expires_at <= NOW(6)`
	sqlKindsLive    = `SELECT kind, owner, depth, permits, token, TRUE FROM turnstile_holds WHERE name = ? AND expires_at > NOW(6)`
	sqlKindsHolders = `SELECT kind, owner, depth, permits, token, expires_at > NOW(6) FROM turnstile_holds WHERE name = ?`
	sqlKindsToken   = `UPDATE turnstile_locks SET token = LAST_INSERT_ID(GREATEST(token + 1, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED))) WHERE name = ?`
	sqlKindsHold    = `INSERT INTO turnstile_holds (name, kind, owner, depth, permits, token, expires_at)
VALUES (?, ?, ?, 1, ?, ?, NOW(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE depth = 1, permits = VALUES(permits), token = VALUES(token), expires_at = VALUES(expires_at)`
	sqlKindsReenter = `UPDATE turnstile_holds SET depth = depth + 1, expires_at = GREATEST(expires_at, NOW(6) + INTERVAL ? MICROSECOND)
WHERE name = ? AND kind = 'reentrant' AND owner = ?`
	sqlKindsClaim = `INSERT INTO turnstile_holds (name, kind, owner, depth, permits, token, expires_at)
VALUES (?, 'claim', ?, 0, 0, 0, NOW(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)`
	sqlKindsUnclaim = `DELETE FROM turnstile_holds WHERE name = ? AND kind = 'claim' AND owner = ?`
	// A reentrant hold is renewed to at least ttl from now, never cut
	// short: each of the owner's leases is renewed on its own schedule.
	sqlKindsExtend = `UPDATE turnstile_holds
SET expires_at = IF(kind = 'reentrant', GREATEST(expires_at, NOW(6) + INTERVAL ? MICROSECOND), NOW(6) + INTERVAL ? MICROSECOND)
WHERE name = ? AND kind = ? AND owner = ? AND expires_at > NOW(6)`
	sqlKindsDepth   = `SELECT depth FROM turnstile_holds WHERE name = ? AND kind = ? AND owner = ? AND expires_at > NOW(6)`
	sqlKindsLeave   = `UPDATE turnstile_holds SET depth = depth - 1 WHERE name = ? AND kind = ? AND owner = ? AND depth > 1 AND expires_at > NOW(6)`
	sqlKindsRelease = `DELETE FROM turnstile_holds WHERE name = ? AND kind = ? AND owner = ? AND expires_at > NOW(6)`
)

// The lock kinds, for turnstile.Reentrant, turnstile.Semaphore and
// turnstile.ReadWrite, which check their settings and hand them here.
// There is no fair view: the store keeps no queue of
// waiters, so turnstile.Fair refuses a mysql Backend.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
)

// kindView is a lock kind on a Backend. Its holds are rows of table
// turnstile_holds, one per holder, whose expiry on the server's clock is
// the lease's TTL; no user lock (GET_LOCK) is taken, so a kind's lease
// holds exactly as long as its row lives, as on the stores that have only
// TTLs. An acquisition is one transaction on the lock connection of the
// key, which first locks the key's row in turnstile_locks: that
// serialises the acquisitions of a key across processes, and the row's
// counter gives the token. The kinds' locks are apart from the plain
// lock's — a plain and a reentrant lock on one key do not exclude each
// other — but they share the key's fencing tokens.
//
// The first use of a kind on a Backend creates turnstile_holds if it is
// missing, so an account that only takes plain locks needs no privilege
// on it.
type kindView struct {
	b *Backend
	sqlkinds.Spec
}

var (
	_ driver.Backend = (*kindView)(nil)
	_ driver.Namer   = (*kindView)(nil)
	_ driver.Shared  = (*kindView)(nil)
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

// errRefused ends a transaction that found the key taken; what it wrote
// (a writer's claim) is committed.
var errRefused = errors.New("refused")

// tx runs fn in a transaction on the lock connection of name. fn's
// errRefused commits and reports ok=false.
func (v *kindView) tx(ctx context.Context, name, what string, fn func(ctx context.Context, tx *sql.Tx) error) (bool, error) {
	ctx, s, done := v.b.lockShard(ctx, name)
	defer done()
	c, err := v.kindsConn(ctx, s)
	if err != nil {
		return false, err
	}
	// Read committed: a key's acquisitions are serialised by its fence
	// row, and without gap locks those of neighbouring keys do not
	// deadlock.
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, fmt.Errorf("%s: %s %s: %w", v.b.name, v.Label, what, s.fail(err))
	}
	ferr := fn(ctx, tx)
	if ferr != nil && !errors.Is(ferr, errRefused) {
		_ = tx.Rollback()
		var opt permitsError
		if errors.As(ferr, &opt) {
			return false, opt.error
		}
		return false, fmt.Errorf("%s: %s %s: %w", v.b.name, v.Label, what, s.fail(ferr))
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("%s: %s %s: %w", v.b.name, v.Label, what, s.fail(err))
	}
	return ferr == nil, nil
}

// Acquire implements driver.Backend. A look at the live holders without
// locking anything comes first: while the key is taken, waiters polling
// it do not queue on its fence row ahead of the holders' own calls. Only
// an acquisition that may succeed locks the fence row and decides again.
func (v *kindView) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := sqlkinds.CheckLease(ctx, "mysql", key, owner, ttl, time.Microsecond); err != nil {
		return 0, false, err
	}
	name := LockName(key)
	var tok uint64
	if free, err := v.look(ctx, key, name, owner); err != nil || !free {
		return 0, false, err
	}
	ok, err := v.tx(ctx, name, "acquire", func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sqlKindsFence, name); err != nil {
			return err
		}
		all, err := scanHolders(tx.QueryContext(ctx, sqlKindsHolders, name))
		if err != nil {
			return err
		}
		hs := all[:0:0]
		for _, h := range all {
			if h.live {
				hs = append(hs, h)
			}
		}
		if len(hs) < len(all) {
			if _, err := tx.ExecContext(ctx, sqlKindsPrune, name); err != nil {
				return err
			}
		}
		if no, err := v.refused(key, owner, hs); err != nil {
			return permitsError{err}
		} else if no {
			return v.refuse(ctx, tx, name, owner)
		}
		if v.Kind == "reentrant" {
			for _, h := range hs {
				if h.kind == "reentrant" { // owner's: a re-entry
					tok = h.token
					_, err := tx.ExecContext(ctx, sqlKindsReenter, ttl.Microseconds(), name, owner)
					return err
				}
			}
		}
		for _, h := range hs {
			if v.Kind == "write" && h.kind == "claim" && h.owner == owner {
				if _, err := tx.ExecContext(ctx, sqlKindsUnclaim, name, owner); err != nil {
					return err
				}
			}
		}
		res, err := tx.ExecContext(ctx, sqlKindsToken, name)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		tok = uint64(id)
		_, err = tx.ExecContext(ctx, sqlKindsHold, name, v.Kind, owner, v.Permits, tok, ttl.Microseconds())
		return err
	})
	if err != nil || !ok {
		return 0, false, err
	}
	return tok, true, nil
}

// look reads the live holders of name without a transaction or a lock,
// one statement: whether owner may get the key. A refused writer leaves
// its claim.
func (v *kindView) look(ctx context.Context, key, name, owner string) (bool, error) {
	ctx, s, done := v.b.lockShard(ctx, name)
	defer done()
	c, err := v.kindsConn(ctx, s)
	if err != nil {
		return false, err
	}
	hs, err := scanHolders(c.QueryContext(ctx, sqlKindsLive, name))
	if err != nil {
		return false, fmt.Errorf("%s: %s acquire: %w", v.b.name, v.Label, s.fail(err))
	}
	no, err := v.refused(key, owner, hs)
	if err != nil || !no {
		return !no, err
	}
	if v.Kind == "write" {
		if _, err := c.ExecContext(ctx, sqlKindsClaim, name, owner, v.Claim.Microseconds()); err != nil {
			return false, fmt.Errorf("%s: %s acquire: %w", v.b.name, v.Label, s.fail(err))
		}
	}
	return false, nil
}

// refuse ends a refused acquisition: a writer's leaves its claim, which
// keeps new readers out.
func (v *kindView) refuse(ctx context.Context, tx *sql.Tx, name, owner string) error {
	if v.Kind == "write" {
		if _, err := tx.ExecContext(ctx, sqlKindsClaim, name, owner, v.Claim.Microseconds()); err != nil {
			return err
		}
	}
	return errRefused
}

// Extend implements driver.Backend: it renews owner's hold.
func (v *kindView) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := sqlkinds.CheckLease(ctx, "mysql", key, owner, ttl, time.Microsecond); err != nil {
		return false, err
	}
	name := LockName(key)
	held := false
	err := v.conn(ctx, name, "extend", func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, sqlKindsExtend, ttl.Microseconds(), ttl.Microseconds(), name, v.Kind, owner)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 1 {
			held = n == 1
			return err
		}
		// A renewal to the same microsecond changes no row: ask whether
		// the hold is there, not only whether it changed.
		held, err = v.holds(ctx, c, name, owner)
		return err
	})
	return held, err
}

// holds reports whether owner holds name in the view's kind.
func (v *kindView) holds(ctx context.Context, c *sql.Conn, name, owner string) (bool, error) {
	var depth int
	err := c.QueryRowContext(ctx, sqlKindsDepth, name, v.Kind, owner).Scan(&depth)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Release implements driver.Backend: it takes back one acquisition of
// owner's hold, and returns ok=false if owner holds none. Its statements
// need no transaction: a Backend runs the calls on one name one at a
// time, and only the holder itself changes its row's count.
func (v *kindView) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := sqlkinds.CheckOwner(ctx, "mysql", key, owner); err != nil {
		return false, err
	}
	name := LockName(key)
	held := false
	err := v.conn(ctx, name, "release", func(ctx context.Context, c *sql.Conn) error {
		if v.Kind == "reentrant" {
			res, err := c.ExecContext(ctx, sqlKindsLeave, name, v.Kind, owner)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				held = n == 1
				return err
			}
		}
		res, err := c.ExecContext(ctx, sqlKindsRelease, name, v.Kind, owner)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		held = n == 1
		return err
	})
	return held, err
}

// kindsConn returns s's connection, with turnstile_holds created on the
// first use of a kind.
func (v *kindView) kindsConn(ctx context.Context, s *shard) (*sql.Conn, error) {
	c, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	if err := v.b.kindsTable(ctx, c); err != nil {
		return nil, fmt.Errorf("%s: create table turnstile_holds: %w", v.b.name, s.fail(err))
	}
	return c, nil
}

// conn runs fn on the lock connection of name, outside a transaction.
func (v *kindView) conn(ctx context.Context, name, what string, fn func(ctx context.Context, c *sql.Conn) error) error {
	ctx, s, done := v.b.lockShard(ctx, name)
	defer done()
	c, err := v.kindsConn(ctx, s)
	if err != nil {
		return err
	}
	if err := fn(ctx, c); err != nil {
		return fmt.Errorf("%s: %s %s: %w", v.b.name, v.Label, what, s.fail(err))
	}
	return nil
}

// kindsTable creates turnstile_holds on the first use of a kind.
func (b *Backend) kindsTable(ctx context.Context, c *sql.Conn) error {
	b.kindsMu.Lock()
	defer b.kindsMu.Unlock()
	if b.kindsReady {
		return nil
	}
	if _, err := c.ExecContext(ctx, sqlKindsSchema); err != nil {
		return err
	}
	b.kindsReady = true
	return nil
}
