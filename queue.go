package turnstile

import (
	"context"
	"errors"
	"fmt"

	"github.com/turnstilelock/turnstile/driver"
)

// errQueueBudget ends a wait in a store's queue that outlasted the
// backoff's total wait.
var errQueueBudget = errors.New("turnstile: queue wait budget used up")

// acquireQueued waits in the store's own queue (driver.Queuer) instead of
// retrying. The wait is bounded by the Backoff's wait budget, or by ctx
// alone when the Backoff has no bound.
func (c *Client) acquireQueued(ctx context.Context, q driver.Queuer, key string, cfg *config) (*Lease, error) {
	// The wait ends with the Client too.
	qctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life, func() { cancel(ErrClosed) })
	defer stop()
	budget, bounded := waitBudget(cfg.backoff)
	if bounded {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeoutCause(qctx, budget, errQueueBudget)
		defer cancel()
	}
	if cfg.position != nil {
		qctx = driver.WithPositionFunc(qctx, cfg.position)
	}
	owner := newOwner(cfg)
	token, since, err := driver.AcquireWaitSince(qctx, q, key, owner, cfg.storeTTL(cfg.ttl))
	if err != nil {
		switch {
		case c.closed.Load():
			return nil, c.wrap("acquire", key, joinErrors(ErrClosed, err))
		case ctx.Err() != nil:
			return nil, c.wrap("acquire", key, joinErrors(context.Cause(ctx), err))
		case errors.Is(context.Cause(qctx), errQueueBudget):
			return nil, c.wrap("acquire", key, fmt.Errorf("%w (waited %v in the store's queue)", ErrNotAcquired, budget))
		}
		c.abandon(cfg, key, owner)
		return nil, c.wrap("acquire", key, err)
	}
	sent, why := mono(since.Sub(epoch)), "the store's queue granted it longer ago"
	if since.IsZero() {
		// The store granted the lock at some moment during the wait;
		// renewing it now gives the lease a send time that is certainly
		// no later than the start of the TTL the store counts.
		sent, why = now(), "renewal took longer"
		ok, err := c.backend.Extend(ctx, key, owner, cfg.storeTTL(cfg.ttl))
		if err != nil || !ok {
			c.abandon(cfg, key, owner)
			if err == nil {
				err = fmt.Errorf("%w: lost right after the store's queue granted it", ErrNotAcquired)
			}
			return nil, c.wrap("acquire", key, err)
		}
	}
	l, err := c.newLease(ctx, key, owner, token, sent, cfg)
	if errors.Is(err, errBornExpired) {
		err = fmt.Errorf("%w: %s than the ttl %v allows", ErrNotAcquired, why, cfg.ttl)
	}
	if err != nil {
		return nil, c.wrap("acquire", key, err)
	}
	return l, nil
}
