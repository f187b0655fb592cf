package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// releaseTimeout bounds the release after the command exits. A store
// that answers releases it in milliseconds; one that does not answer
// within this is failing, and the lock expires by itself after its TTL,
// so turnstile must not wait for it longer.
const releaseTimeout = 2 * time.Second

// closeTimeout bounds closing the Client and what acquire opened with it
// on the way out: closing waits for the store in places (a Redis client
// closes each connection with a PING, for up to a second each), which a
// store that stopped answering never gives. turnstile exits without
// waiting longer: exiting closes the connections all the same.
const closeTimeout = time.Second

// runCmd implements "turnstile run".
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args)
	if code, done := cli.FlagsDone("run", err, runUsage, stdout, stderr); done {
		return code
	}
	return o.run(ctx, stdout, stderr)
}

// closeRest closes what acquire opened besides the Client it returned.
func (o *runOptions) closeRest() {
	for i := len(o.closers) - 1; i >= 0; i-- {
		_ = o.closers[i]()
	}
	o.closers = nil
}

// closeAll closes c (if not nil) and what acquire opened with it, and
// returns once they are closed or closeTimeout has passed.
func (o *runOptions) closeAll(c *turnstile.Client) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c != nil {
			_ = c.Close()
		}
		o.closeRest()
	}()
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// run takes the lock, runs the command under it and releases it.
func (o *runOptions) run(ctx context.Context, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 4)
	for _, s := range forwardedSignals {
		// A signal ignored by whoever started turnstile (nohup, "&" in a
		// script) stays ignored: catching it would take that away from
		// the command, which inherits the ignored disposition.
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)

	if o.metricsAddr != "" {
		mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		defer stop()
		obs, _, err := cli.ServeMetrics(mctx, o.metricsAddr, stderr)
		if errors.Is(err, cli.ErrMetricsListen) {
			fmt.Fprintf(stderr, "turnstile run: %v\nRun \"turnstile run -h\" for usage.\n", err)
			return exitUsage
		}
		if err != nil {
			fmt.Fprintf(stderr, "turnstile run: %v\n", err)
			return exitUnavailable
		}
		o.clientOpts = append(o.clientOpts, obs)
	}

	warnStore(stderr, "run", o.backend)

	// A signal while waiting for the lock ends the wait: there is no
	// command yet to pass it to.
	actx, cancel := context.WithCancelCause(ctx)
	stopWatch := cli.CancelOnSignal(sigs, cancel)
	var c *turnstile.Client
	var lease *turnstile.Lease
	var code int
	if o.leader != "" {
		c, lease, code = o.campaign(actx, stderr)
	} else {
		c, lease, code = o.acquire(actx, stderr)
	}
	stopWatch()
	defer o.closeAll(c)
	if c == nil {
		cancel(nil)
		return code
	}
	if lease == nil {
		cancel(nil)
		return code
	}
	interrupted := context.Cause(actx)
	cancel(nil)

	code, lost := exitOK, false
	if interrupted != nil {
		fmt.Fprintf(stderr, "turnstile run: %v; not starting the command\n", interrupted)
		code = cli.InterruptCode(interrupted)
	} else {
		code, lost = o.supervise(ctx, lease, sigs, stdout, stderr)
	}
	if lost {
		// Nothing to release: the lock was taken from turnstile, or ran out
		// of renewals until its local deadline, by which the store lets go
		// of it too. A release could only wait on a store that stopped
		// answering.
		return exitLeaseLost
	}

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	err := lease.Release(rctx)
	switch {
	case errors.Is(err, turnstile.ErrNotHeld) && interrupted == nil:
		fmt.Fprintf(stderr, "turnstile run: the lock on %q had expired when the command finished (exit status %d); its work may have overlapped with another holder's\n", o.key, code)
		lost = true
	case err != nil && !errors.Is(err, turnstile.ErrNotHeld):
		fmt.Fprintf(stderr, "turnstile run: warning: release: %s (the lock expires by itself within --ttl %v)\n", o.describe(err), o.ttl)
	}
	if lost {
		return exitLeaseLost
	}
	return code
}

// campaign opens the backend and campaigns in the election --leader
// names, as --wait and --no-wait say, announcing --value. It returns as
// acquire does, with the lease that makes turnstile leader; the term and
// value go to the command's environment.
func (o *runOptions) campaign(ctx context.Context, stderr io.Writer) (*turnstile.Client, *turnstile.Lease, int) {
	wctx := ctx
	if o.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, o.wait, errWaitExpired)
		defer cancel()
	}
	c, err := turnstile.Open(wctx, o.backend, append([]turnstile.Option{turnstile.WithTTL(o.ttl)}, o.clientOpts...)...)
	if err != nil {
		if errors.Is(context.Cause(wctx), errWaitExpired) {
			fmt.Fprintf(stderr, "turnstile run: lock store unavailable: no answer within --wait %v: %s\n%s", o.wait, o.describe(err), defaultStoreNote("run", o.backendFrom))
			return nil, nil, exitUnavailable
		}
		return nil, nil, o.fail(wctx, stderr, err)
	}
	e, err := c.Election(o.leader)
	if err != nil {
		return c, nil, o.fail(wctx, stderr, err)
	}
	// One attempt first, as for a lock: a store that cannot be reached
	// is reported at once instead of being retried for the whole wait.
	l, err := e.TryCampaign(wctx, o.value)
	if errors.Is(err, turnstile.ErrNotAcquired) && !o.noWait {
		l, err = e.Campaign(wctx, o.value)
	}
	if err != nil {
		return c, nil, o.notElected(wctx, stderr, e, err)
	}
	term := strconv.FormatUint(l.Term(), 10)
	o.env = append(o.env, "TURNSTILE_LEADER="+o.leader, "TURNSTILE_TERM="+term, "TURNSTILE_VALUE="+l.Value())
	return c, l.Lease(), exitOK
}

// leaderLookup bounds the look-up of who leads, for the message of a
// candidate that was not elected: it only adds a name to the message.
const leaderLookup = time.Second

// notElected reports why turnstile did not become leader and returns the
// exit code: as for a lock, with the leader named where the store says
// who it is.
func (o *runOptions) notElected(ctx context.Context, stderr io.Writer, e *turnstile.Election, err error) int {
	waitExpired := errors.Is(context.Cause(ctx), errWaitExpired)
	if !errors.Is(err, turnstile.ErrNotAcquired) && !waitExpired {
		return o.fail(ctx, stderr, err)
	}
	led := ""
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaderLookup)
	defer cancel()
	if ldr, lerr := e.Leader(lctx); lerr == nil && ldr.Elected {
		led = fmt.Sprintf(": %s leads in term %d", strconv.Quote(ldr.Value), ldr.Term)
	}
	if waitExpired {
		fmt.Fprintf(stderr, "turnstile run: not elected leader of %q within --wait %v%s\n", o.leader, o.wait, led)
	} else {
		fmt.Fprintf(stderr, "turnstile run: %q has a leader already (--no-wait)%s\n", o.leader, led)
	}
	return exitNotAcquired
}
