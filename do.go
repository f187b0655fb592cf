package turnstile

import (
	"context"
	"errors"
	"time"
)

// releaseTimeout bounds the release Do makes after fn returns, which runs
// even when the caller's context is already done.
const releaseTimeout = 5 * time.Second

// Do acquires key (waiting per the Backoff), runs fn while the lease is
// held, and always releases it afterwards. The context fn receives is
// cancelled when ctx is done or the lease is lost; in the second case
// context.Cause matches ErrLockLost and Do's error does too, so the caller
// knows the work may have overlapped with another holder's.
func Do(ctx context.Context, c *Client, key string, fn func(ctx context.Context, l *Lease) error, opts ...Option) error {
	if c == nil {
		return ErrNilClient
	}
	if fn == nil {
		return joinErrors(ErrInvalidOption, errors.New("turnstile: nil function"))
	}
	l, err := c.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	ferr := fn(fctx, l)
	stop()
	cancel(nil)

	lost := l.lost()
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	rerr := l.Release(rctx)

	var errs []error
	if ferr != nil {
		errs = append(errs, ferr)
	}
	if lost {
		errs = append(errs, c.wrap("hold", key, context.Cause(l.Context())))
	} else if rerr != nil {
		errs = append(errs, rerr)
	}
	return joinErrors(errs...)
}
