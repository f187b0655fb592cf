package redis

import (
	"context"
	"time"
)

// A rueidis connection serves a lone caller on its synchronous path: the
// caller writes the command and reads the reply itself. It switches to
// its background mode for good — a writer and a reader goroutine, with
// two more goroutine handoffs per round trip, 20 µs of an uncontended
// pair's 100 on two cores (docs/performance.md) — at the first command
// that overlaps another, or whose context can end without a deadline:
// the synchronous path bounds a round trip by a deadline on the socket
// and cannot watch a context's Done channel. Every command turnstile
// sends on a rueidis client therefore carries a deadline (lone).

// unbounded is the deadline lone gives a context that can end without
// one. rueidis bounds a round trip by its ConnWriteTimeout (10 s by
// default) first, as it does for a context that can never end; only a
// client whose ConnWriteTimeout is longer, or off, meets this one.
const unbounded = 24 * time.Hour

// bounded is a context with a deadline reported to rueidis only: it ends
// when its parent does, and its parent ends by then (settling), or the
// deadline stands for the connection's own timeout (lone).
type bounded struct {
	context.Context
	at time.Time
}

func (b bounded) Deadline() (time.Time, bool) { return b.at, true }

// lone returns ctx such that a command run on it alone takes rueidis's
// synchronous path: ctx itself when it has a deadline or can never end,
// or ctx with the deadline unbounded from now. A caller whose context
// ends while a round trip is on the synchronous path gets the reply
// (or the connection's timeout) instead of its context's error: turnstile
// returns ctx.Err() after it and undoes what the reply granted, as it
// does for a reply that arrives after the context ended anyway. A round
// trip still in flight at its deadline fails there and rueidis closes its
// connection (the next command dials again), as go-redis does: the
// command may or may not have run, which every caller already allows
// for a broken connection.
func lone(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx
	}
	return bounded{ctx, time.Now().Add(unbounded)}
}

// pastDeadline reports whether ctx's deadline, if it has one, has passed.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
