package turnstile

import (
	"context"
	"sync"
	"time"
)

// closeGrace is how long Close waits for the releases the Client makes in
// the background before it abandons them: their locks then expire after
// their TTL, as every lock the Client holds at Close does.
const closeGrace = 500 * time.Millisecond

// giveBackTimeout bounds one release of a lock nobody will use.
const giveBackTimeout = 2 * time.Second

// cleanups runs the releases of locks that an acquisition may have taken
// without its caller getting them: an attempt whose reply was lost, a
// lock handed to a waiter that stopped waiting, a lease born expired.
// They run detached, so that the call returns as soon as its context is
// done; Close gives them closeGrace, then cancels them. Its zero value is
// ready.
type cleanups struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
	ctx    context.Context // the parent of every release's context, once used
	cancel context.CancelFunc
}

// run starts f detached, with a context that ends after timeout or when
// the Client is closed past its grace. It reports false, running
// nothing, once close has begun.
func (g *cleanups) run(timeout time.Duration, f func(ctx context.Context)) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
	parent := g.ctx
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		f(ctx)
	}()
	return true
}

// close waits up to grace for the running releases, then cancels them
// and waits for them to return.
func (g *cleanups) close(grace time.Duration) {
	g.mu.Lock()
	g.closed = true
	cancel := g.cancel
	g.mu.Unlock()
	if cancel == nil {
		return
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	cancel()
	<-done
}

// giveBack releases key for owner in the store: a lock taken, perhaps,
// for a call that will not use it. Its owner id is nobody else's (a
// fixed owner id is never given back: the caller's next attempt uses it
// again). wake: the lock was certainly held — handed to a waiter that
// stopped waiting — and the head of the key's line is woken once it is
// free, since no lease ends with it. After Close it runs at once and for
// at most closeGrace.
func (c *Client) giveBack(key, owner string, ttl time.Duration, wake bool) {
	release := func(ctx context.Context) {
		_, _ = c.backend.Release(ctx, key, owner)
		if wake {
			c.wakeLine(key)
		}
	}
	if c.bg.run(min(ttl, giveBackTimeout), release) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	release(ctx)
}

// wakeLine wakes the head of this Client's line for key, if any.
func (c *Client) wakeLine(key string) {
	if ln, ok := c.lines.load(key); ok {
		select {
		case ln.local <- struct{}{}:
		default:
		}
	}
}

// unsubscribe ends a subscription to release notices: a round trip that
// the caller, done waiting, does not wait for.
func (c *Client) unsubscribe(stop func()) {
	if !c.bg.run(giveBackTimeout, func(context.Context) { stop() }) {
		stop()
	}
}
