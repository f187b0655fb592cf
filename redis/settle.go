package redis

import (
	"context"
	"time"
)

// settleWait bounds how long Acquire still waits for the reply of its
// script once the caller's context has ended. The script is usually on
// its way to the server by then and runs there anyway; waiting for its
// reply lets the caller's clean-up (an owner-checked release) be sent
// after the script ran. Without the wait the release could overtake the
// script on another of the client's pipelined connections, find the lock
// free, and the script would then take it, left held until its TTL.
const settleWait = time.Second

// settling returns the context an acquisition's round trip runs on: it
// ends settleWait after ctx does, or when stop is called. A context that
// can never end is returned as it is.
func settling(ctx context.Context) (sctx context.Context, stop func()) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unwatch := context.AfterFunc(ctx, func() {
		// Once stop ran, the timer's cancel is a no-op.
		time.AfterFunc(settleWait, func() { cancel(context.Cause(ctx)) })
	})
	return sctx, func() {
		unwatch()
		cancel(nil)
	}
}
