package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// dialRetryMin and dialRetryMax bound the pause after a failed connection
// attempt before a shard starts the next. A server that refuses or
// resets every connection answers each attempt at once: without a pause,
// every waiter's and renewal's operation would open one, hundreds a
// second, and PostgreSQL forks a process for each. Those it has not yet
// forked when the fault heals queue ahead of the first connection that
// could succeed — seconds of backlog on a busy server.
const (
	dialRetryMin = 50 * time.Millisecond
	dialRetryMax = 500 * time.Millisecond
)

// dialRetry is the pause after the n-th failed attempt in a row: it
// doubles from dialRetryMin up to dialRetryMax, jittered down by up to a
// half so that the shards and processes that failed together spread out.
func dialRetry(n int) time.Duration {
	d := min(dialRetryMin<<min(max(n-1, 0), 8), dialRetryMax)
	return d/2 + rand.N(d/2+1)
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
	failures int         // failed attempts since the last success
	retryAt  time.Time   // no new attempt before this, after a failure
	lastErr  error       // the last failure, told to a caller that gives up
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
		s.dial.failures++
		s.dial.retryAt = time.Now().Add(dialRetry(s.dial.failures))
		s.dial.lastErr = d.err
		return d.err
	case s.conn == nil && s.held != nil:
		s.conn = d.conn
		s.dial.failures, s.dial.retryAt, s.dial.lastErr = 0, time.Time{}, nil
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
// starts another beside it (up to maxDials in flight). After a failed
// attempt the next one waits out dialRetry.
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
			if wait := time.Until(s.dial.retryAt); s.dial.inFlight == 0 && wait > 0 {
				next.Reset(wait)
				continue
			}
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
			return s.dial.gaveUp(ctx.Err())
		case <-giveUp.C:
			return s.dial.gaveUp(fmt.Errorf("no connection within the operation timeout (%v): %w", opTimeout, context.DeadlineExceeded))
		}
	}
}

// gaveUp is err, with the last failed attempt's error when there is one:
// a caller whose deadline ran out waiting for a connection learns why.
func (d *dialer) gaveUp(err error) error {
	if d.lastErr == nil {
		return err
	}
	return fmt.Errorf("%w (the last connection attempt: %v)", err, d.lastErr)
}

// closeConn closes a connection no shard uses.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
