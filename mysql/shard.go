package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"time"
)

// shard is one pinned connection and the locks its session holds. Its
// mutex serialises the connection: a session runs one statement at a time.
type shard struct {
	db   *sql.DB
	mu   sync.Mutex
	conn *sql.Conn       // nil until first use and after a failure
	held map[string]hold // row name → owner; what this session's GET_LOCKs are for
}

type hold struct {
	owner    string
	lock     string    // the user lock's name
	deadline time.Time // local: after it the lock is released
}

// lockShard returns the shard of name, locked, and a statement's context
// for the calls made on its connection; done unlocks the shard and ends
// the context.
func (b *Backend) lockShard(ctx context.Context, name string) (_ context.Context, _ *shard, done func()) {
	s := b.shard(name)
	ctx, cancel := statementContext(ctx)
	s.mu.Lock()
	return ctx, s, func() {
		s.mu.Unlock()
		cancel()
	}
}

// get returns the shard's connection, pinning one if needed.
func (s *shard) get(ctx context.Context) (*sql.Conn, error) {
	if s.conn != nil {
		return s.conn, nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s.conn = c
	return c, nil
}

// fail handles an error of a statement: when the session is in doubt it
// drops the connection, and with it every lock of the shard. Their rows
// keep others out until their TTLs end; their owners learn of the loss at
// their next Extend.
func (s *shard) fail(err error) error {
	if isConnErr(err) {
		s.discard()
	}
	return permission(err)
}

// discard closes the connection for good rather than return it to the
// pool with locks held, and forgets the locks.
func (s *shard) discard() {
	if s.conn != nil {
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = s.conn.Close()
		s.conn = nil
	}
	clear(s.held)
}

func (s *shard) acquire(ctx context.Context, r ref, owner string, ttl time.Duration) (uint64, bool, error) {
	start := time.Now()
	name := r.name
	h, ours := s.held[name]
	if ours && h.owner != owner && start.Before(h.deadline) {
		return 0, false, nil // another owner of this Backend: GET_LOCK would re-enter
	}
	c, err := s.get(ctx)
	if err != nil {
		return 0, false, err
	}
	var res sql.Result
	if ours { // owner's retry, or the session's lock of an expired owner
		res, err = c.ExecContext(ctx, sqlAcquire, name, owner, ttl.Microseconds())
	} else {
		res, err = c.ExecContext(ctx, sqlTake, name, owner, ttl.Microseconds(), r.lock)
		if err != nil && isConnErr(err) && ctx.Err() == nil {
			// The server closed the connection (wait_timeout, KILL, a
			// restart), most likely while it sat idle: try once on a
			// fresh one. The session's locks are gone already, and if the
			// first try did reach the row, this is owner's retry.
			s.discard()
			if c, err = s.get(ctx); err != nil {
				return 0, false, err
			}
			res, err = c.ExecContext(ctx, sqlTake, name, owner, ttl.Microseconds(), r.lock)
		}
	}
	if err != nil {
		if !isConnErr(err) && !ours {
			s.unlock(ctx, c, r.lock)
		}
		return 0, false, s.fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, err
	}
	if n == 0 {
		// Another session holds the user lock, or another owner's lease is
		// still live because its session died (or was cut off) before its
		// TTL ended.
		if !ours {
			s.unlock(ctx, c, r.lock)
		}
		return 0, false, nil
	}
	tok, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	s.held[name] = hold{owner: owner, lock: r.lock, deadline: start.Add(ttl)}
	return uint64(tok), true, nil
}

func (s *shard) extend(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	start := time.Now()
	h, ok := s.held[name]
	if !ok || h.owner != owner {
		return false, nil
	}
	if !start.Before(h.deadline) {
		s.drop(ctx, name)
		return false, nil
	}
	res, err := s.conn.ExecContext(ctx, sqlExtend, ttl.Microseconds(), name, owner)
	if err != nil {
		return false, s.fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 0 { // expired on the server's clock, or removed behind our back
		s.drop(ctx, name)
		return false, nil
	}
	h.deadline = start.Add(ttl)
	s.held[name] = h
	return true, nil
}

func (s *shard) release(ctx context.Context, name, owner string) (bool, error) {
	now := time.Now()
	h, ok := s.held[name]
	if !ok || h.owner != owner {
		return false, nil
	}
	res, err := s.conn.ExecContext(ctx, sqlRelease, h.lock, name, owner)
	if err != nil {
		return false, s.fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 1 { // the statement freed the user lock too
		delete(s.held, name)
	} else {
		s.drop(ctx, name)
	}
	return n == 1 && now.Before(h.deadline), nil
}

// drop forgets name and frees its user lock.
func (s *shard) drop(ctx context.Context, name string) {
	h, ok := s.held[name]
	delete(s.held, name)
	if ok && s.conn != nil {
		s.unlock(ctx, s.conn, h.lock)
	}
}

// unlock frees the session's user lock; if that fails the session is
// dropped.
// It runs even when the caller's ctx is done: an unlock cut short would
// cost the connection and every lock on it.
func (s *shard) unlock(ctx context.Context, c *sql.Conn, lock string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	if _, err := c.ExecContext(ctx, sqlReleaseLock, lock); err != nil {
		// Whatever failed, the session may keep the user lock while this
		// shard forgets it; only ending the session is sure to free it.
		s.discard()
	}
}

// expire releases the shard's locks whose deadline passed.
func (s *shard) expire(stop <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for name, h := range s.held {
		if now.Before(h.deadline) {
			continue
		}
		select {
		case <-stop:
			return
		default:
		}
		s.drop(ctx, name)
	}
}
