package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/bench/render"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// preflightTimeout bounds the first contact with the target: opening
// turnstile on it and reading its counters once.
const preflightTimeout = 15 * time.Second

// benchCmd implements "turnstile bench".
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseBench(args)
	if code, done := cli.FlagsDone("bench", err, benchUsage, stdout, stderr); done {
		return code
	}
	return o.run(ctx, stdout, stderr)
}

// run sets up the target, runs the cells one after another and prints
// what they measured, also when interrupted part-way.
func (o *benchOptions) run(ctx context.Context, stdout, stderr io.Writer) int {
	ctx, stop := cli.CancelOnStopSignals(ctx)
	defer stop()

	t := o.target
	if o.url == "" {
		servers, own, err := startBenchServers(o.ownServers())
		if err != nil {
			fmt.Fprintf(stderr, "turnstile bench: %v\n", err)
			return exitUnavailable
		}
		defer servers.Close()
		t = own
		fmt.Fprintf(stderr, "turnstile bench: %s\n", t.name)
	} else {
		fmt.Fprintln(stderr, o.loadWarning())
	}
	version, code := o.preflight(ctx, t, stderr)
	if code != exitOK {
		return code
	}

	rep := render.Report{Title: "turnstile bench", Started: time.Now(), Notes: o.notes(t, version)}
	for _, s := range o.skipped {
		fmt.Fprintln(stderr, "turnstile bench: "+s)
		rep.Notes = append(rep.Notes, s)
	}
	enc := json.NewEncoder(stdout)
	failed := false
	problem := func(format string, a ...any) {
		p := fmt.Sprintf(format, a...)
		rep.Problems = append(rep.Problems, p)
		failed = true
	}
	for _, c := range o.cells {
		if ctx.Err() != nil {
			break
		}
		id := c.workload.ID()
		fmt.Fprintf(stderr, "%-18s ", id)
		res, err := o.runCell(ctx, t, c)
		if err != nil {
			if ctx.Err() != nil {
				// Interrupted before its workers ran (warm-up): nothing
				// measured; every lock taken has been released.
				fmt.Fprintln(stderr, "interrupted")
				rep.Problems = append(rep.Problems, id+": interrupted before it ended; not measured")
				break
			}
			fmt.Fprintf(stderr, "\nturnstile bench: %v\n", err)
			problem("%s: %v", id, err)
			continue
		}
		fmt.Fprintf(stderr, "%9.0f acq/s  p99 %8.0f µs  %5.2f cmds/acq  %d errors\n", res.PerSecond, res.P99Micros, res.CommandsPerAcq, res.Errors)
		interrupted := ctx.Err() != nil
		switch {
		case interrupted:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: interrupted after %.1fs of %v; its figures cover that time", id, res.Seconds, o.duration))
		case res.Acquisitions == 0:
			problem("%s: no lock acquired in %v", id, o.duration)
		}
		if res.Errors > 0 {
			problem("%s: %d errors, the first: %s", id, res.Errors, res.Error)
		}
		rep.Cells = append(rep.Cells, res)
		if o.json {
			if err := enc.Encode(res); err != nil {
				fmt.Fprintf(stderr, "turnstile bench: %v\n", err)
				return 1
			}
		}
		if interrupted {
			break
		}
	}

	if !o.json {
		if err := render.Table(stdout, rep); err != nil {
			fmt.Fprintf(stderr, "turnstile bench: %v\n", err)
			return 1
		}
	}
	if o.html != "" {
		if err := writeBenchHTML(o.html, rep); err != nil {
			fmt.Fprintf(stderr, "turnstile bench: %v\n", err)
			failed = true
		} else {
			fmt.Fprintln(stderr, "turnstile bench: wrote", o.html)
		}
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		fmt.Fprintf(stderr, "turnstile bench: %v; stopped after %d of %d cells, their locks released\n", cause, len(rep.Cells), len(o.cells))
		return cli.InterruptCode(cause)
	}
	if failed {
		return 1
	}
	return exitOK
}

// runCell runs one cell on the target.
func (o *benchOptions) runCell(ctx context.Context, t benchTarget, c benchCell) (workload.Result, error) {
	url, addrs := t.single, t.singleAddrs
	if c.redlock {
		url, addrs = t.redlock, t.redlockAddrs
	}
	return workload.Run(ctx, workload.Cell{Workload: c.workload, Library: benchLibrary(url), Addrs: addrs, Duration: o.duration})
}

// benchLibrary is turnstile on url, opened for each cell with
// workload.OpenTurnstile (the cell's lock TTL and backoff), so that
// everything the URL says applies: user, password, database, TLS,
// prefix. The addresses workload.Run passes to Open are the servers it
// counts commands on; the URL names them already.
func benchLibrary(url string) workload.Library {
	return workload.Library{
		Name:      "turnstile",
		MultiNode: true,
		Open: func(ctx context.Context, _ []string, _ int) (workload.Locker, error) {
			return workload.OpenTurnstile(ctx, url)
		},
	}
}

// preflight opens turnstile on the target and reads the counters of its
// servers once, so that a wrong URL, an unreachable server or a refused
// INFO is reported at once rather than once per cell. It returns the
// servers' version, and exitOK or the code to exit with.
func (o *benchOptions) preflight(ctx context.Context, t benchTarget, stderr io.Writer) (string, int) {
	pctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	var urls, addrs []string
	for _, c := range o.cells {
		url, as := t.single, t.singleAddrs
		if c.redlock {
			url, as = t.redlock, t.redlockAddrs
		}
		if !slices.Contains(urls, url) {
			urls = append(urls, url)
			addrs = append(addrs, as...)
		}
	}
	fail := func(err error) (string, int) {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "turnstile bench: %v before any cell ran\n", context.Cause(ctx))
			return "", cli.InterruptCode(context.Cause(ctx))
		}
		fmt.Fprintf(stderr, "turnstile bench: %v\n", err)
		return "", exitUnavailable
	}
	for _, url := range urls {
		lk, err := workload.OpenTurnstile(pctx, url)
		if err != nil {
			// The error of turnstile.Open names the store, password masked.
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			err = cli.HideURL(err, url)
			if ctx.Err() == nil && isURLError(err) {
				fmt.Fprintf(stderr, "turnstile bench: %s: %s\nRun \"turnstile bench -h\" for usage.\n", o.urlFrom, describe(err))
				return "", exitUsage
			}
			return fail(fmt.Errorf("cannot open the server: %s", describe(err)))
		}
		_ = lk.Close()
	}
	counter, err := workload.NewCounter(addrs)
	if err != nil {
		return fail(err)
	}
	defer counter.Close()
	if _, err := counter.Read(pctx); err != nil {
		return fail(fmt.Errorf("%w\n(turnstile bench counts the commands of each cell with INFO commandstats on every server; the server must allow it: ACL +info)", err))
	}
	info, _ := counter.Do(pctx, 0, "INFO", "server")
	return serverVersion(info), exitOK
}

// isURLError reports whether err says the URL itself is wrong.
func isURLError(err error) bool {
	return errors.Is(err, turnstile.ErrInvalidURL) || errors.Is(err, turnstile.ErrUnknownScheme) ||
		errors.Is(err, turnstile.ErrInvalidOption) || errors.Is(err, turnstile.ErrInvalidTTL)
}

// loadWarning is the line that tells, before anything runs, that the run
// loads the server given with --url.
func (o *benchOptions) loadWarning() string {
	workers := 0
	for _, c := range o.cells {
		workers = max(workers, c.workload.Concurrency)
	}
	n := time.Duration(len(o.cells))
	return fmt.Sprintf("turnstile bench: warning: this loads %s with up to %d lock workers for about %v (%d cells of %v); its keys are {bench:RANDOM:...}, released or expiring within seconds",
		o.target.name, workers, n*o.duration, n, o.duration)
}

// notes describe the run in the HTML report.
func (o *benchOptions) notes(t benchTarget, version string) []string {
	return []string{
		fmt.Sprintf("%s %s/%s, %d CPUs (GOMAXPROCS %d); redis %s: %s.", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), version, t.name),
		fmt.Sprintf("Each cell runs %v after a warm-up; lock TTL %v; %v–%v (full jitter) between attempts on a held key, besides release notices.", o.duration, workload.TTL, workload.Backoff.Base, workload.Backoff.Cap),
		"Server commands count everything INFO commandstats counts on the servers, commands run inside scripts and other clients' commands included.",
	}
}

// serverVersion picks redis_version out of INFO server.
func serverVersion(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "(unknown version)"
}

// writeBenchHTML writes the report's HTML page to path.
func writeBenchHTML(path string, rep render.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = render.HTML(f, rep)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
