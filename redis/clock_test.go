package redis

import (
	"context"
	"errors"
	"testing"
	"time"
)

// timeConn answers TIME from a function and nothing else.
type timeConn struct {
	conn
	calls int
	time  func() (int64, error)
}

func (c *timeConn) serverTime(context.Context) (int64, error) {
	c.calls++
	return c.time()
}

// TestServerClock: the reading is the sampled server time plus the time
// elapsed here, sampled again once it is clockResync old; a failed sample
// gives no reading (the scripts read TIME) until the next try, clockRetry
// later; elapsed time is the greater of the monotonic and the wall
// clock's.
func TestServerClock(t *testing.T) {
	ctx := context.Background()
	var c serverClock
	server := int64(1_700_000_000_000_000)
	cn := &timeConn{time: func() (int64, error) { return server, nil }}

	r := c.now(ctx, cn)
	if cn.calls != 1 || r < server || r > server+int64(time.Second/time.Microsecond) {
		t.Fatalf("first reading %d after %d samples, want one sample of %d (erring high by the round trip)", r, cn.calls, server)
	}
	if c.now(ctx, cn); cn.calls != 1 {
		t.Fatalf("a fresh sample was taken again (%d samples)", cn.calls)
	}

	// Ten seconds later by both clocks: read from the old sample, then
	// sampled again.
	s := c.sample.Load()
	c.sample.Store(&clockSample{server: s.server, local: s.local.Add(-clockResync), wall: s.wall.Add(-clockResync)})
	if r := c.reading(); r < server+clockResync.Microseconds() {
		t.Fatalf("reading %d of a sample 10 s old, want at least %d", r, server+clockResync.Microseconds())
	}
	server += 42
	if r := c.now(ctx, cn); cn.calls != 2 || r < server {
		t.Fatalf("reading %d after %d samples, want a second sample of %d", r, cn.calls, server)
	}

	// A machine suspended for an hour: the monotonic clock stood still,
	// the wall clock did not.
	s = c.sample.Load()
	c.sample.Store(&clockSample{server: s.server, local: s.local, wall: s.wall.Add(-time.Hour)})
	if r := c.reading(); r < server+time.Hour.Microseconds() {
		t.Fatalf("reading %d after an hour of suspension, want at least %d", r, server+time.Hour.Microseconds())
	}
	// The wall clock stepped back an hour: the monotonic one did not.
	c.sample.Store(&clockSample{server: s.server, local: s.local.Add(-time.Minute), wall: s.wall.Add(time.Hour)})
	if r := c.reading(); r < server+time.Minute.Microseconds() {
		t.Fatalf("reading %d after the wall clock stepped back, want at least %d", r, server+time.Minute.Microseconds())
	}

	// The server does not answer: no reading until the retry.
	var f serverClock
	down := &timeConn{time: func() (int64, error) { return 0, errors.New("connection refused") }}
	if r := f.now(ctx, down); r != 0 || down.calls != 1 {
		t.Fatalf("reading %d after a failed sample (%d tries), want 0 after one", r, down.calls)
	}
	if r := f.now(ctx, down); r != 0 || down.calls != 1 {
		t.Fatalf("reading %d, %d tries within the retry period, want 0 and one", r, down.calls)
	}
	s = f.sample.Load()
	f.sample.Store(&clockSample{local: s.local.Add(-clockRetry), wall: s.wall.Add(-clockRetry)})
	down.time = func() (int64, error) { return server, nil }
	if r := f.now(ctx, down); r < server || down.calls != 2 {
		t.Fatalf("reading %d after %d tries, want a sample of %d on the retry", r, down.calls, server)
	}
}

// TestServerClockBoundsItsError: a reading errs high by the round trip of
// its sample, so a sample whose round trip is longer than clockMaxError
// is not kept (the scripts read TIME until the retry): a token started
// from it would stand above the server's time by that much, and a server
// that lost the key's fence meanwhile (a failover, a restart) would issue
// a later grant a smaller token. Such slow samples come with faults: a
// server paused or overloaded answers TIME late.
func TestServerClockBoundsItsError(t *testing.T) {
	ctx := context.Background()
	var c serverClock
	server := int64(1_700_000_000_000_000)
	slow := &timeConn{time: func() (int64, error) {
		time.Sleep(3 * clockMaxError)
		return server, nil
	}}
	if r := c.now(ctx, slow); r != 0 || slow.calls != 1 {
		t.Fatalf("reading %d from a sample that took over %v, want none (0)", r, 3*clockMaxError)
	}
	if r := c.now(ctx, slow); r != 0 || slow.calls != 1 {
		t.Fatalf("reading %d, %d tries within the retry period, want 0 and one", r, slow.calls)
	}
}

// failoverConn is a conn whose client follows failovers.
type failoverConn struct{ timeConn }

func (*failoverConn) failsOver() bool { return true }

// TestServerClockOffWhereFencesFailOver: on a deployment whose grants can
// be lost in a failover (Sentinel, Cluster), every grant reads the
// server's own TIME: two primaries at once (the old one resumed, the
// promoted replica) then order their grants by the time each ran them,
// not by readings that err high by a client's round trip.
func TestServerClockOffWhereFencesFailOver(t *testing.T) {
	cn := &failoverConn{timeConn{time: func() (int64, error) { return 1_700_000_000_000_000, nil }}}
	b := &Backend{conn: cn}
	b.clock.off = cn.failsOver()
	if r := b.clock.now(context.Background(), b.conn); r != 0 || cn.calls != 0 {
		t.Fatalf("reading %d after %d samples on a deployment that fails over, want none", r, cn.calls)
	}
}
