package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxDials is the most connection attempts a shard has in flight at
// once: a fault that swallows every attempt leaves at most this many
// half-open connections per shard until they time out.
const maxDials = 3

// dialHedge is how long a shard's newest connection attempt may go
// unanswered before an operation starts another beside it: a connection
// set up during a network fault may never hear back, while one set up
// after the heal answers in milliseconds. A healthy connection's setup
// (TCP, startup, authentication, TLS) takes far less than a second; a
// short operation timeout hedges sooner.
func dialHedge(opTimeout time.Duration) time.Duration {
	return min(max(opTimeout/5, 100*time.Millisecond), time.Second)
}

// dialed is the outcome of one connection attempt.
type dialed struct {
	conn *pgx.Conn
	err  error
}

// dialer runs a shard's connection attempts off the operations' path:
// an attempt outlives the operation that started it, and the next
// operation takes its connection, or hedges with another attempt, rather
// than wait behind it. Guarded by the shard's sem, but for results, which
// attempts send as they end.
type dialer struct {
	inFlight int
	newest   time.Time   // when the newest attempt in flight began
	results  chan dialed // buffered: an attempt never waits to report
}

func newDialer() dialer { return dialer{results: make(chan dialed, maxDials)} }

// start begins a connection attempt, bounded by the operation timeout
// and ended early by Close.
func (s *shard) startDial() {
	b := s.b
	s.dial.inFlight++
	s.dial.newest = time.Now()
	b.dials.Go(func() {
		ctx, cancel := context.WithTimeout(b.life, b.cfg.opTimeout)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, b.connCfg.Copy())
		s.dial.results <- dialed{c, err}
	})
}

// settle takes the results of ended attempts: the first connection
// becomes the shard's if it has none, the others are closed. It reports
// the last failure it took.
func (s *shard) settle() error {
	var failed error
	for {
		select {
		case d := <-s.dial.results:
			failed = cmpErr(s.take(d), failed)
		default:
			return failed
		}
	}
}

// take accounts for one attempt's result and returns its error.
func (s *shard) take(d dialed) error {
	s.dial.inFlight--
	switch {
	case d.err != nil:
		return d.err
	case s.conn == nil && s.held != nil:
		s.conn = d.conn
	default: // a spare, or the Backend closed
		s.b.dials.Go(func() { closeConn(d.conn) })
	}
	return nil
}

func cmpErr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// connect gives the shard a session, waiting until an attempt succeeds,
// the last attempt in flight fails, ctx ends or the operation timeout
// passes. While the newest attempt goes unanswered for dialHedge it
// starts another beside it (up to maxDials in flight).
func (s *shard) connect(ctx context.Context) error {
	_ = s.settle() // failures of attempts whose operations gave up are old news
	if s.conn != nil {
		return nil
	}
	opTimeout := s.b.cfg.opTimeout
	hedge := dialHedge(opTimeout)
	giveUp := time.NewTimer(opTimeout)
	defer giveUp.Stop()
	next := time.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-next.C:
			if s.dial.inFlight == 0 || (s.dial.inFlight < maxDials && time.Since(s.dial.newest) >= hedge) {
				s.startDial()
			}
			next.Reset(max(time.Until(s.dial.newest.Add(hedge)), time.Millisecond))
		case d := <-s.dial.results:
			err := s.take(d)
			if s.conn != nil {
				return nil
			}
			if s.dial.inFlight == 0 {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp.C:
			return fmt.Errorf("no connection within the operation timeout (%v): %w", opTimeout, context.DeadlineExceeded)
		}
	}
}

// closeConn closes a connection no shard uses.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
