package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/driver"
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
	opts := append([]turnstile.Option{turnstile.WithTTL(o.ttl)}, o.clientOpts...)
	if o.kind == kindFair {
		opts = append(opts, turnstile.WithQueuePosition(o.positionReporter(stderr)))
	}
	c, err := turnstile.Open(wctx, o.backend, opts...)
	if err != nil {
		if errors.Is(context.Cause(wctx), errWaitExpired) {
			// The store never answered: it is unavailable, not busy.
			fmt.Fprintf(stderr, "turnstile run: lock store unavailable: no answer within --wait %v: %s\n%s", o.wait, o.describe(err), defaultStoreNote("run", o.backendFrom))
			return nil, nil, exitUnavailable
		}
		return nil, nil, o.fail(wctx, stderr, err)
	}
	if c, err = o.kindClient(c, opts); err != nil {
		fmt.Fprintf(stderr, "turnstile run: %s\nRun \"turnstile run -h\" for usage.\n", o.describe(err))
		return nil, nil, exitUsage
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

// errNoKind is the error of kindClient when the store has no lock of the
// kind asked for: a usage error, since the command line asks for
// something the store it names cannot do.
var errNoKind = errors.New("lock kind not available")

// kindClient returns the Client that takes the lock kind asked for: c
// itself for a plain lock, and for a fair lock on a store that queues
// its waiters (etcd, ZooKeeper: c waits in the store's queue already);
// else a Client over the view of c's store that is that kind, with c
// closed after it. On error c is closed.
func (o *runOptions) kindClient(c *turnstile.Client, opts []turnstile.Option) (*turnstile.Client, error) {
	if o.kind == kindPlain {
		return c, nil
	}
	var view driver.Backend
	var err error
	b := c.Backend()
	switch o.kind {
	case kindShared:
		view, _, err = turnstile.ReadWrite(b)
	case kindExclusive:
		_, view, err = turnstile.ReadWrite(b)
	case kindSemaphore:
		view, err = turnstile.Semaphore(b, o.permits)
	case kindFair:
		view, err = turnstile.Fair(b)
	}
	if errors.Is(err, turnstile.ErrUnsupported) {
		err = fmt.Errorf("%w: %s needs %s; %s:// has none", errNoKind, o.kindFlag(), o.kindStores(), o.scheme())
	}
	if err == nil && view == b {
		return c, nil // the store's plain lock is already the kind (a queue is fair)
	}
	if err == nil {
		var kc *turnstile.Client
		if kc, err = turnstile.New(view, opts...); err == nil {
			o.closers = append(o.closers, c.Close)
			return kc, nil
		}
	}
	_ = c.Close()
	return nil, err
}

// kindFlag is the flag that chose o's lock kind, as given.
func (o *runOptions) kindFlag() string {
	if o.kind == kindSemaphore {
		return fmt.Sprintf("--semaphore %d", o.permits)
	}
	return "--" + kindFlags[o.kind-1]
}

// kindStores says which stores have o's lock kind.
func (o *runOptions) kindStores() string {
	switch o.kind {
	case kindFair:
		return "a store with a fair queue (mem, redis, rediss, etcd or zookeeper)"
	case kindSemaphore:
		return "a store with semaphores (every store but redlock)"
	}
	return "a store with read-write locks"
}

// scheme is the scheme of o's backend URL ("postgres"), for messages:
// it never holds a secret.
func (o *runOptions) scheme() string {
	scheme, _, _ := strings.Cut(o.backend, ":")
	return strings.ToLower(scheme)
}

// positionReporter returns the WithQueuePosition function of --fair: it
// says on stderr where in line turnstile is whenever that changes.
func (o *runOptions) positionReporter(stderr io.Writer) func(int) {
	last := 0
	return func(pos int) {
		if pos == last || pos < 1 {
			return
		}
		last = pos
		fmt.Fprintf(stderr, "turnstile: you are %s in line for %s\n", ordinal(pos), o.key)
	}
}

// ordinal writes n as 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st.
func ordinal(n int) string {
	suffix := "th"
	switch n % 100 {
	case 11, 12, 13:
	default:
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
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
		fmt.Fprintf(stderr, "turnstile run: %s\nRun \"turnstile run -h\" for usage.\n", o.describe(err))
		return exitUsage
	default:
		// The library names the store in err, with any password masked;
		// o.backend would show it in the clear.
		fmt.Fprintf(stderr, "turnstile run: lock store unavailable: %s\n%s%s", o.describe(err), storeHint(err), defaultStoreNote("run", o.backendFrom))
		return exitUnavailable
	}
}

// storeHint is a line of advice for a store error that has a known
// remedy, or "".
func storeHint(err error) string {
	if errors.Is(err, turnstile.ErrPermission) {
		return "hint: the store's user lacks a permission turnstile needs; docs/security.md lists what each store's user needs\n"
	}
	return ""
}

// describe is describe(err) with the store's URL, wherever err shows it,
// shown as cli.HideURL does: without a query value that could be a
// misspelled secret.
func (o *runOptions) describe(err error) string {
	return describe(cli.HideURL(err, o.backend))
}

// describe is err's message without the "turnstile: " prefix that every
// library error starts with, since the messages here start with
// "turnstile run: " already.
func describe(err error) string {
	return strings.TrimPrefix(err.Error(), "turnstile: ")
}
