package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// A rueidis connection serves a lone caller on its synchronous path: the
// caller writes the command and reads the reply itself. It switches to
// its background mode for good — a writer and a reader goroutine, with
// two more goroutine handoffs per round trip, about 40 µs of an
// uncontended pair's 110 on two cores (docs/performance.md) — at the
// first command that overlaps another, or whose context can end without
// a deadline. The synchronous path bounds a round trip by a deadline on
// the socket and watches no context's Done channel.
//
// A Backend that dials its own client (Dial, every URL) therefore gives
// every command whose context can end a deadline (lone), and ends the
// round trip itself when that context ends first: it dials every
// connection through a cutConn, which learns from the deadline rueidis
// sets on it which call's round trip it carries, and a call whose
// context ends sets that connection's deadline in the past. The read
// fails at once, rueidis closes the connection (the next command dials
// again), and the caller gets its context's error, as on the background
// path. A Backend over a caller's client (New) cannot reach its
// connections and leaves contexts as they are.

// cutter hands out the deadlines of lone calls and ends the round trip
// of a call whose context ended. Its zero value is not used; newCutter
// makes one per client.
type cutter struct {
	// longest is the longest deadline rueidis keeps on the synchronous
	// path: its ConnWriteTimeout, or its dial timeout if sooner. A later
	// deadline is replaced by rueidis's own, which names no call.
	longest time.Duration
	seq     atomic.Uint64
	shards  [cutShards]cutShard
	// inflight counts the calls between lone and done. Only a call
	// that finds no other in flight is watched: concurrent calls
	// overlap on rueidis's connections, which then serve them in the
	// background mode, where rueidis watches each context itself, and
	// the watching would cost them allocations for nothing.
	inflight atomic.Int64
}

const cutShards = 16

type cutShard struct {
	mu    sync.Mutex
	calls map[int64]*loneCall // by the deadline's UnixNano
}

// loneCall is one call's round trip, and the context it runs on: the
// caller's, with the call's own deadline. conn (the connection that
// carries the round trip, once rueidis set the call's deadline on one)
// and ended (the caller's context ended) are guarded by the shard's
// mutex.
type loneCall struct {
	context.Context
	at    time.Time
	key   int64
	sh    *cutShard
	stop  func() bool
	conn  *cutConn
	ended bool
}

func (lc *loneCall) Deadline() (time.Time, bool) { return lc.at, true }

// cutNow runs when the call's context ends: it cuts the round trip if a
// connection carries it, or has the connection cut it when it does.
func (lc *loneCall) cutNow() {
	lc.sh.mu.Lock()
	lc.ended = true
	c := lc.conn
	lc.sh.mu.Unlock()
	if c != nil {
		c.cut(lc.key)
	}
}

// done is called once the reply of a call that lone returned lc for is
// in (or the call failed): the context's end no longer cuts anything.
func (k *cutter) done(lc *loneCall) {
	if k == nil {
		return
	}
	k.inflight.Add(-1)
	if lc == nil {
		return
	}
	lc.stop()
	lc.sh.mu.Lock()
	delete(lc.sh.calls, lc.key)
	lc.conn = nil
	lc.sh.mu.Unlock()
}

// newCutter returns the cutter of a client dialled with opt and sets
// opt's dialling to wrap every connection in a cutConn.
func newCutter(opt *rueidis.ClientOption) *cutter {
	longest := opt.ConnWriteTimeout
	if longest == 0 { // rueidis's default
		longest = max(rueidis.DefaultTCPKeepAlive, opt.Dialer.KeepAlive) * 10
	}
	if longest < 0 {
		longest = unbounded
	}
	// A call that finds its connection closed dials it again under its
	// own context, and rueidis gives the handshake a deadline of its own
	// (the dial timeout) when the context's is later: the call's
	// deadline, no later than that, still names the handshake's round
	// trip, so that a call whose context ends while a stalled server
	// keeps it there is cut too. (Dial shortens the dial timeout to fit
	// its own context after this: the handshake's deadline is then the
	// sooner one, and bounds the wait by itself.)
	dial := opt.Dialer.Timeout
	if dial <= 0 {
		dial = rueidis.DefaultDialTimeout
	}
	k := &cutter{longest: min(longest, dial, unbounded)}
	for i := range k.shards {
		k.shards[i].calls = map[int64]*loneCall{}
	}
	connect := opt.DialCtxFn
	if connect == nil {
		connect = plainDial
	}
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		c, err := connect(ctx, dst, d, cfg)
		if err != nil {
			return nil, err
		}
		return &cutConn{Conn: c, k: k}, nil
	}
	return k
}

// plainDial dials as rueidis does without a DialCtxFn.
func plainDial(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	if cfg != nil {
		td := tls.Dialer{NetDialer: d, Config: cfg}
		return td.DialContext(ctx, "tcp", dst)
	}
	return d.DialContext(ctx, "tcp", dst)
}

// unbounded is the longest deadline lone hands out, for a client whose
// ConnWriteTimeout is off.
const unbounded = 24 * time.Hour

// past is the deadline that ends a round trip at once.
var past = time.Unix(1, 0)

// lone returns the context to run one command (or one pipeline) on, and
// the call to pass to done when its reply is in. A context that can
// never end, or one of a call that overlaps another (inflight), is
// returned as it is, with no call: rueidis bounds the round trip of the
// first by its own timeout, and watches the second's context in its
// background mode. Any other gets a deadline of its own — the context's, or longest from now, whichever is sooner, made a
// few nanoseconds earlier so that no other call in flight has the same —
// and is watched: when it ends first, the call's round trip is cut. k
// nil (a caller's client) returns ctx as it is.
func (k *cutter) lone(ctx context.Context) (context.Context, *loneCall) {
	if k == nil {
		return ctx, nil
	}
	if k.inflight.Add(1) > 1 || ctx.Done() == nil {
		return ctx, nil
	}
	base := time.Now().Add(k.longest)
	if dl, ok := ctx.Deadline(); ok && dl.Before(base) {
		base = dl
	}
	lc := &loneCall{Context: ctx}
	for {
		lc.at = base.Add(-time.Duration(k.seq.Add(1)%1_000_000 + 1))
		lc.key = lc.at.UnixNano()
		lc.sh = &k.shards[uint64(lc.key)%cutShards]
		lc.sh.mu.Lock()
		if _, taken := lc.sh.calls[lc.key]; !taken {
			lc.sh.calls[lc.key] = lc
			lc.sh.mu.Unlock()
			break
		}
		lc.sh.mu.Unlock()
	}
	lc.stop = context.AfterFunc(ctx, lc.cutNow)
	return lc, lc
}

// bind is told every deadline rueidis sets on c: a lone call's deadline
// binds the call to c, and cuts c at once if the call's context already
// ended. c.mu is held.
func (k *cutter) bind(c *cutConn, key int64) {
	sh := &k.shards[uint64(key)%cutShards]
	sh.mu.Lock()
	lc := sh.calls[key]
	if lc != nil {
		lc.conn = c
	}
	ended := lc != nil && lc.ended
	sh.mu.Unlock()
	if ended {
		_ = c.Conn.SetDeadline(past)
	}
}

// cutConn is a client connection whose round trip a lone call's context
// can end. mu orders the deadlines rueidis sets and the cuts: a cut acts
// only while the connection's deadline is still the call's, so it never
// reaches the next command on the connection, nor the background mode's
// writer and reader, which clear the deadline when they start.
type cutConn struct {
	net.Conn
	k   *cutter
	mu  sync.Mutex
	key int64 // UnixNano of the deadline last set; 0 for none
}

func (c *cutConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.Conn.SetDeadline(t)
	c.key = 0
	if !t.IsZero() {
		c.key = t.UnixNano()
		c.k.bind(c, c.key)
	}
	return err
}

// cut ends the round trip of the call whose deadline is key, if the
// connection still carries it.
func (c *cutConn) cut(key int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == key {
		_ = c.Conn.SetDeadline(past)
	}
}

// bounded is a context with a deadline reported to rueidis only: it ends
// when its parent does, and its parent ends by then (settling).
type bounded struct {
	context.Context
	at time.Time
}

func (b bounded) Deadline() (time.Time, bool) { return b.at, true }

// cutError is err as the caller of a lone call whose context is ctx
// sees it: a round trip cut because ctx ended failed with ctx's error,
// not with the deadline rueidis was given.
func cutError(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return ctx.Err()
	}
	return err
}

// pastDeadline reports whether ctx's deadline, if it has one, has passed.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
