package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// errWaitExpired is the cause of the acquisition context when --wait runs
// out, which tells it apart from an interruption.
var errWaitExpired = errors.New("--wait expired")

// acquire opens the backend and takes the lock as --wait and --no-wait
// say. It returns the Client (nil if the backend could not be opened) and
// the lease; when either is missing it has said why on stderr and returns
// the exit code.
func (o *runOptions) acquire(ctx context.Context, stderr io.Writer) (*turnstile.Client, *turnstile.Lease, int) {
	// --wait bounds the whole wait, connecting included: a store that
	// accepts connections and never answers must not hold turnstile for
	// the dial timeout when the caller asked to wait less.
	wctx := ctx
	if o.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, o.wait, errWaitExpired)
		defer cancel()
	}
	c, err := turnstile.Open(wctx, o.backend, append([]turnstile.Option{turnstile.WithTTL(o.ttl)}, o.clientOpts...)...)
	if err != nil {
		if errors.Is(context.Cause(wctx), errWaitExpired) {
			// The store never answered: it is unavailable, not busy.
			fmt.Fprintf(stderr, "turnstile run: lock store unavailable: no answer within --wait %v: %s\n", o.wait, describe(err))
			return nil, nil, exitUnavailable
		}
		return nil, nil, o.fail(wctx, stderr, err)
	}

	// One attempt first, even when waiting: a store that cannot be reached
	// is reported at once instead of being retried for the whole wait.
	lease, err := c.TryAcquire(wctx, o.key)
	if err == nil {
		return c, lease, exitOK
	}
	if !errors.Is(err, turnstile.ErrNotAcquired) || o.noWait {
		return c, nil, o.fail(wctx, stderr, err)
	}
	forever := turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1}
	lease, err = c.Acquire(wctx, o.key, turnstile.WithBackoff(forever))
	if err != nil {
		return c, nil, o.fail(wctx, stderr, err)
	}
	return c, lease, exitOK
}

// fail reports why the lock was not taken and returns the exit code.
func (o *runOptions) fail(ctx context.Context, stderr io.Writer, err error) int {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errWaitExpired):
		// Claim contention only when the last attempt saw it: the wait may
		// also have ended while the store was failing.
		why := ""
		if errors.Is(err, turnstile.ErrNotAcquired) {
			why = ": another owner holds it"
		}
		fmt.Fprintf(stderr, "turnstile run: lock %q not acquired within --wait %v%s\n", o.key, o.wait, why)
		return exitNotAcquired
	case cause != nil:
		fmt.Fprintf(stderr, "turnstile run: %v while waiting for lock %q\n", cause, o.key)
		return cli.InterruptCode(cause)
	case errors.Is(err, turnstile.ErrNotAcquired):
		fmt.Fprintf(stderr, "turnstile run: lock %q is held by another owner (--no-wait)\n", o.key)
		return exitNotAcquired
	case errors.Is(err, turnstile.ErrUnknownScheme), errors.Is(err, turnstile.ErrInvalidURL),
		errors.Is(err, turnstile.ErrInvalidKey), errors.Is(err, turnstile.ErrInvalidTTL),
		errors.Is(err, turnstile.ErrInvalidOption):
		fmt.Fprintf(stderr, "turnstile run: %s\nRun \"turnstile run -h\" for usage.\n", describe(err))
		return exitUsage
	default:
		// The library names the store in err, with any password masked;
		// o.backend would show it in the clear.
		fmt.Fprintf(stderr, "turnstile run: lock store unavailable: %s\n", describe(err))
		return exitUnavailable
	}
}

// describe is err's message without the "turnstile: " prefix that every
// library error starts with, since the messages here start with
// "turnstile run: " already.
func describe(err error) string {
	return strings.TrimPrefix(err.Error(), "turnstile: ")
}
