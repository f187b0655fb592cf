package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// measureCost measures what an acquisition costs the server of
// --backend with the cells of "turnstile bench": uncontended/c=1 for the
// round trip (its median acquisition is one script's round trip),
// uncontended/c=64 for the server CPU time per acquisition, and, when
// the URL is a Redlock of two or more nodes, its Redlock cell. It returns
// the cost and exitOK, or the exit code after saying what went wrong.
func measureCost(ctx context.Context, in *adviseInput, stderr io.Writer) (cost, int) {
	t, err := parseBenchURL(in.backend, in.from)
	if err != nil {
		fmt.Fprintf(stderr, "turnstile advise: %v\nRun \"turnstile advise -h\" for usage.\n", err)
		return cost{}, exitUsage
	}
	ctx, stop := cli.CancelOnStopSignals(ctx)
	defer stop()

	fail := func(err error) (cost, int) {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "turnstile advise: %v while measuring\n", context.Cause(ctx))
			return cost{}, cli.InterruptCode(context.Cause(ctx))
		}
		fmt.Fprintf(stderr, "turnstile advise: measuring %s: %v\n", t.name, err)
		return cost{}, exitUnavailable
	}
	// Open once first, so that a wrong URL is a usage error at once.
	pctx, pcancel := context.WithTimeout(ctx, preflightTimeout)
	lk, err := workload.OpenTurnstile(pctx, t.single)
	pcancel()
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		if ctx.Err() == nil && isURLError(err) {
			fmt.Fprintf(stderr, "turnstile advise: %s: %s\nRun \"turnstile advise -h\" for usage.\n", in.from, describe(err))
			return cost{}, exitUsage
		}
		return fail(fmt.Errorf("cannot open the server: %s", describe(err)))
	}
	_ = lk.Close()

	cells := []struct {
		w      workload.Workload
		url    string
		addrs  []string
		result *workload.Result
	}{
		{w: workload.Workload{Name: "uncontended", Concurrency: 1, Nodes: len(t.singleAddrs)}, url: t.single, addrs: t.singleAddrs},
		{w: workload.Workload{Name: "uncontended", Concurrency: 64, Nodes: len(t.singleAddrs)}, url: t.single, addrs: t.singleAddrs},
	}
	if t.redlock != "" {
		n := len(t.redlockAddrs)
		cells = append(cells, struct {
			w      workload.Workload
			url    string
			addrs  []string
			result *workload.Result
		}{w: workload.Workload{Name: "redlock-" + strconv.Itoa(n), Concurrency: 64, Nodes: n}, url: t.redlock, addrs: t.redlockAddrs})
	}
	fmt.Fprintf(stderr, "turnstile advise: measuring %s with up to 64 lock workers for about %v (%d cells of %v); its keys are {bench:RANDOM:...}, released or expiring within seconds\n",
		t.name, in.duration*time.Duration(len(cells)), len(cells), in.duration)
	for i := range cells {
		c := &cells[i]
		res, err := workload.Run(ctx, workload.Cell{Workload: c.w, Library: benchLibrary(c.url), Addrs: c.addrs, Duration: in.duration})
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", c.w.ID(), err))
		}
		fmt.Fprintf(stderr, "%-18s %9.0f acq/s  p50 %6.0f µs  %6.1f µs server CPU/acq\n", c.w.ID(), res.PerSecond, res.P50Micros, res.ServerCPUMicrosPerAcq)
		switch {
		case res.Errors > 0:
			return fail(fmt.Errorf("%s: %d lock errors, the first: %s", c.w.ID(), res.Errors, res.Error))
		case res.Acquisitions == 0:
			return fail(fmt.Errorf("%s: no lock acquired in %v", c.w.ID(), in.duration))
		case c.w.Concurrency > 1 && res.ServerCPUMicrosPerAcq <= 0:
			return fail(fmt.Errorf("%s: the server reported no CPU time (INFO cpu)", c.w.ID()))
		}
		c.result = &res
	}
	// What was not measured scales with what was, by the documented
	// ratios: a Redlock's cost with one server's when no Redlock was
	// measured, and a short script's always. The databases' and
	// ensembles' figures stay documented.
	m := documentedCost()
	m.source, m.roundTrip, m.redisCPU = "measured", cells[0].result.P50Micros, cells[1].result.ServerCPUMicrosPerAcq
	m.scriptCPU = m.redisCPU * docScriptCPU / docRedisCPU
	m.redlockCPU = m.redisCPU * docRedlockCPU / docRedisCPU
	if len(cells) == 3 {
		m.redlockCPU, m.redlockN = cells[2].result.ServerCPUMicrosPerAcq, cells[2].w.Nodes
	}
	return m, exitOK
}
