package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// shard is one lock connection and the locks this Backend holds on it.
// The advisory locks live in the connection's session, so one operation at
// a time runs on it, in the order callers get sem.
type shard struct {
	b   *Backend
	sem chan struct{} // a mutex whose wait honours ctx

	// Guarded by sem.
	conn *pgx.Conn
	gen  uint64 // counts sessions: a hold of an older one lost its advisory lock
	held map[string]*hold
	dial dialer // the connection attempts (dial.go)
}

// hold is a key this Backend holds the advisory lock of.
type hold struct {
	owner    string
	hash     int64
	gen      uint64
	deadline time.Time // local; after it the lease is over and the advisory lock goes
	timer    *time.Timer
}

func (s *shard) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *shard) unlock() { <-s.sem }

// session returns the connection, connecting if needed (connect), and a
// context for one query on it. A caller's cancellation must not cut a
// query short: pgx then closes the connection, and with it the advisory
// locks of every key on this shard. So queries are bounded by opTimeout
// instead; the caller's ctx bounds the wait for the shard and for a
// connection, which holds no lock yet.
func (s *shard) session(ctx context.Context) (*pgx.Conn, context.Context, context.CancelFunc, error) {
	if s.conn == nil || s.conn.IsClosed() {
		s.drop()
		if err := s.connect(ctx); err != nil {
			return nil, nil, nil, err
		}
	} else {
		_ = s.settle() // closes spare connections of hedged attempts
	}
	qctx, cancel := context.WithTimeout(context.Background(), s.b.cfg.opTimeout)
	return s.conn, qctx, cancel, nil
}

// failed checks after an error whether the session died, and forgets the
// locks it held if so.
func (s *shard) failed() {
	if s.conn != nil && s.conn.IsClosed() {
		s.drop()
	}
}

// drop closes the session and forgets its locks (the server frees them).
func (s *shard) drop() {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
	s.gen++
	for k, h := range s.held {
		h.timer.Stop()
		delete(s.held, k)
	}
}

// expire runs when a hold's local deadline may have passed: a live
// process whose lease ran out must not keep the advisory lock.
func (s *shard) expire(key string, h *hold) {
	if s.lock(context.Background()) != nil {
		return
	}
	defer s.unlock()
	if s.held[key] != h || time.Now().Before(h.deadline) {
		return
	}
	delete(s.held, key)
	if h.gen != s.gen || s.conn == nil {
		return
	}
	conn, ctx, cancel, err := s.session(context.Background())
	if err != nil {
		return
	}
	defer cancel()
	if _, err := conn.Exec(ctx, expireSQL, h.hash, key); err != nil {
		s.failed()
	}
}

// arm (re)starts h's timer for its deadline.
func (s *shard) arm(key string, h *hold, d time.Duration) {
	if h.timer == nil {
		h.timer = time.AfterFunc(d, func() { s.expire(key, h) })
		return
	}
	h.timer.Reset(d)
}
