package redis

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"
)

// serverClock is the client's reading of the server clock, from which
// fencing tokens start (token.lua's issue_token): a grant's token is the
// greater of this reading and the key's last token + 1. Reading it here
// instead of calling TIME in every acquire script saves the server a
// command per grant.
//
// The reading is the server's TIME, sampled at most every
// clockResync, plus the time elapsed since on this machine — the greater
// of the monotonic and the wall clock's elapsed time, so that neither a
// wall clock stepped back nor a machine suspended (which stops the
// monotonic clock) makes it fall behind — plus the sample's round trip,
// so that it errs high, never low: the token of a key whose fence is gone
// must be above every earlier token of the key, which were issued at
// least the lock TTL + fence grace before by the server's clock.
//
// Off, the client gives no reading and every grant's script reads the
// server's TIME: on a deployment whose primaries fail over (Sentinel,
// Cluster) a grant's fence key may be lost with the old primary, and two
// primaries may grant at once (a paused one resumed beside the replica
// promoted meanwhile); only each server's own clock at the moment it runs
// the grant then orders their tokens as their grants (the servers' clocks
// agreeing), where a client's reading may stand above it by its sample's
// round trip.
type serverClock struct {
	sample  atomic.Pointer[clockSample]
	syncing atomic.Bool
	off     bool // set before first use
}

type clockSample struct {
	server int64     // server time, µs since the epoch, upper bound at local
	local  time.Time // when server applied (with a monotonic reading)
	wall   time.Time // local without its monotonic reading
}

// clockResync is how old a sample may get before a grant takes a new one.
// Between samples the reading drifts with the two machines' clock rates
// (NTP keeps them within 500 ppm of each other: 5 ms in 10 s), far below
// the fence grace.
const clockResync = 10 * time.Second

// clockMaxError bounds how far a reading may stand above the server's
// clock (a sample's round trip): a slower sample is not kept, and the
// scripts read TIME until the retry. Slow samples come with faults — a
// server paused, or overloaded — when a token that errs high by seconds
// would meet a fence lost in a restart within the same time; no server
// restarts within 20 ms.
const clockMaxError = 20 * time.Millisecond

// freshMargin (µs) is how far above the greater of the reading and the
// server's TIME the token of a key whose fence key is gone starts
// (token.lua's fresh_start): more than two clients' readings of one
// server clock differ, a sample's round trip (clockMaxError) and the
// drift between samples (5 ms). The fence outlives a key's last grant by
// far more, unless the server's clock jumps forward: the fence then ends
// at once, and the next grant may come milliseconds after a grant whose
// token another client's reading put above its own.
var freshMargin = strconv.FormatInt((clockMaxError + 5*time.Millisecond).Microseconds(), 10)

// clockRetry is how long after a failed sample the next is tried; the
// scripts read the server's TIME meanwhile.
const clockRetry = time.Second

// now returns the reading in µs, or 0 when there is none (the script then
// reads the server's TIME). When the sample is older than clockResync,
// one caller at a time samples again with a TIME command first.
func (c *serverClock) now(ctx context.Context, cn conn) int64 {
	if c.off {
		return 0
	}
	if s := c.sample.Load(); (s == nil || s.age(time.Now()) >= clockResync) && c.syncing.CompareAndSwap(false, true) {
		c.resync(ctx, cn)
		c.syncing.Store(false)
	}
	return c.reading()
}

// reading is the reading in µs without sampling, 0 when there is none:
// never sampled, or the last sample failed.
func (c *serverClock) reading() int64 {
	s := c.sample.Load()
	if s == nil || s.server == 0 {
		return 0
	}
	return s.server + s.age(time.Now()).Microseconds()
}

// age is how long ago s was taken, by the greater of the two clocks.
func (s *clockSample) age(t time.Time) time.Duration {
	return max(t.Sub(s.local), t.Round(0).Sub(s.wall))
}

// resync samples the server clock. After a failed sample, or one slower
// than clockMaxError, the scripts read the server's TIME until the next
// try, clockRetry later.
func (c *serverClock) resync(ctx context.Context, cn conn) {
	t0 := time.Now()
	us, err := cn.serverTime(ctx)
	t1 := time.Now()
	if err != nil || us <= 0 || t1.Sub(t0) > clockMaxError {
		back := clockResync - clockRetry
		c.sample.Store(&clockSample{local: t0.Add(-back), wall: t0.Round(0).Add(-back)})
		return
	}
	c.sample.Store(&clockSample{server: us + t1.Sub(t0).Microseconds(), local: t1, wall: t1.Round(0)})
}
