package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// releaseTimeout bounds the release after the command exits: the lock
// expires by itself after its TTL, so turnstile must not hang on a store
// that stopped answering.
const releaseTimeout = 5 * time.Second

// runCmd implements "turnstile run".
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, runUsage())
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "turnstile run: %v\nRun \"turnstile run -h\" for usage.\n", err)
		return exitUsage
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

	// A signal while waiting for the lock ends the wait: there is no
	// command yet to pass it to.
	actx, cancel := context.WithCancelCause(ctx)
	stopWatch := cli.CancelOnSignal(sigs, cancel)
	c, lease, code := o.acquire(actx, stderr)
	stopWatch()
	defer o.closeRest()
	if c == nil {
		cancel(nil)
		return code
	}
	defer c.Close()
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

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	err := lease.Release(rctx)
	switch {
	case lost:
	case errors.Is(err, turnstile.ErrNotHeld) && interrupted == nil:
		fmt.Fprintf(stderr, "turnstile run: the lock on %q had expired when the command finished (exit status %d); its work may have overlapped with another holder's\n", o.key, code)
		lost = true
	case err != nil && !errors.Is(err, turnstile.ErrNotHeld):
		fmt.Fprintf(stderr, "turnstile run: warning: release: %s (the lock expires by itself within --ttl %v)\n", describe(err), o.ttl)
	}
	if lost {
		return exitLeaseLost
	}
	return code
}
