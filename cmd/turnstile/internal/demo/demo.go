//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// A scenario is one incident from the field, run twice or more on the
// same setup: once as the naive code that caused it, and once per way
// turnstile prevents it.
type scenario struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environment) ([]result, error)
}

// scenarios lists the scenarios in the order "turnstile demo" runs
// them.
var scenarios = []scenario{
	{"flash-sale", "1,000 units, 3,847 concurrent orders from several processes", runFlashSale},
	{"double-payment", "a client times out and retries a payment", runDoublePayment},
	{"rider", "two dispatchers assign riders to the same orders", runRider},
	{"gc-pause", "a holder paused past its TTL writes with its old token", runGCPause},
	{"long-job", "jobs longer than a fixed TTL write the same file", runLongJob},
	{"owner-id", "five processes share the owner id \"Thread-42\"", runOwnerID},
	{"herd", "2,000 waiters in 2 processes on one key, 1 ms hold each, four ways of waiting", runHerd},
	{"coupon", "8 shoppers race for each of 200 single-use coupon codes", runCoupon},
	{"jobs", "4 workers take 200 jobs from one table; a worker crashes holding jobs", runJobs},
	{"redlock-outage", "3 of a Redlock's 5 nodes die: fail fast, fall back to PostgreSQL, come back", runRedlockOutage},
}

// options is a parsed "turnstile demo" command line.
type options struct {
	scenarios []scenario
	json      bool
	redisURL  string
	pgURL     string
	// redisFrom and pgFrom say where the URLs came from ("--redis",
	// "--backend-file F", "$TURNSTILE_BACKEND", ...), for messages.
	redisFrom string
	pgFrom    string
	inProcess bool
	units     int64
	orders    int
	waiters   int // in herd
	// outageTTL is the lease TTL of redlock-outage, which every other
	// duration of that scenario is a multiple of.
	outageTTL time.Duration
	// outagePhase is the least time its steady phases last; 0: 3 TTLs.
	outagePhase time.Duration
	// metricsAddr serves /metrics there, and keeps serving after the
	// scenarios until interrupted.
	metricsAddr string
}

// Main implements "turnstile demo": args are the arguments after "demo",
// and the result is the exit status of the process: 0 when every turnstile
// variant was right, 1 when one was wrong or a scenario failed to run, 64
// for a usage error, 69 when a server could not be started or reached,
// 128+N when interrupted by signal N. With the hidden worker argument
// first, the process is one of the demo's worker processes instead (see
// the package documentation).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == workerArg {
		return workerMain(ctx, args[1:], stdout, stderr)
	}
	o, err := parseArgs(args)
	if code, done := cli.FlagsDone("demo", err, usage, stdout, stderr); done {
		return code
	}
	return o.run(ctx, stdout, stderr)
}

func parseArgs(args []string) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("demo")
	fs.BoolVar(&o.json, "json", false, "")
	redisFlags := cli.BackendFlags{Want: "want a URL such as redis://127.0.0.1:6379"}
	pgFlags := cli.BackendFlags{Want: "want a URL such as postgres://user@127.0.0.1:5432/db"}
	redisFlags.Register(fs, "redis", "backend")
	pgFlags.RegisterFile(fs, "postgres-file", "postgres")
	fs.BoolVar(&o.inProcess, "in-process", false, "")
	fs.Int64Var(&o.units, "units", defaultFlashUnits, "")
	fs.IntVar(&o.orders, "orders", defaultFlashOrders, "")
	fs.IntVar(&o.waiters, "waiters", herdWaiters, "")
	fs.DurationVar(&o.outageTTL, "outage-ttl", defaultOutageTTL, "")
	fs.DurationVar(&o.outagePhase, "outage-phase", 0, "")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "")
	// Flags may come before or after the scenario names.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			names = append(names, args[1:]...)
			break
		}
		names = append(names, args[0])
		args = args[1:]
	}
	// $TURNSTILE_BACKEND names the Redis unless --in-process asks for
	// none.
	getenv := os.Getenv
	if o.inProcess {
		getenv = nil
	}
	var err error
	if o.redisURL, o.redisFrom, err = redisFlags.Resolve(getenv); err != nil {
		return nil, err
	}
	if o.pgURL, o.pgFrom, err = pgFlags.Resolve(nil); err != nil {
		return nil, err
	}
	if err := cli.CheckMetricsAddr(o.metricsAddr); err != nil {
		return nil, err
	}
	switch {
	case o.inProcess && o.redisURL != "":
		return nil, fmt.Errorf("--in-process and %s exclude each other", o.redisFrom)
	case o.inProcess && o.pgURL != "":
		return nil, fmt.Errorf("--in-process and %s exclude each other", o.pgFrom)
	case o.units < 1 || o.units > 1_000_000:
		return nil, fmt.Errorf("--units %d is outside [1, 1000000]", o.units)
	case o.orders < 1 || o.orders > maxFlashOrders:
		return nil, fmt.Errorf("--orders %d is outside [1, %d]", o.orders, maxFlashOrders)
	case o.waiters < herdProcesses || o.waiters > maxHerdWaiters:
		return nil, fmt.Errorf("--waiters %d is outside [%d, %d]", o.waiters, herdProcesses, maxHerdWaiters)
	case o.outageTTL < minOutageTTL || o.outageTTL > maxOutageTTL:
		return nil, fmt.Errorf("--outage-ttl %v is outside [%v, %v]", o.outageTTL, minOutageTTL, maxOutageTTL)
	case o.outagePhase != 0 && (o.outagePhase < minOutagePhase || o.outagePhase > maxOutagePhase):
		return nil, fmt.Errorf("--outage-phase %v is outside [%v, %v]", o.outagePhase, minOutagePhase, maxOutagePhase)
	}
	if o.redisURL != "" && !strings.HasPrefix(o.redisURL, "redis://") && !strings.HasPrefix(o.redisURL, "rediss://") {
		hint := ""
		if o.redisFrom == "$"+cli.BackendEnv {
			hint = " (the demo runs on Redis: unset " + cli.BackendEnv + " to start servers of its own, or pass --in-process)"
		}
		return nil, fmt.Errorf("%s %s: want a URL such as redis://127.0.0.1:6379%s", o.redisFrom, cli.QuoteArg(o.redisURL), hint)
	}
	if o.pgURL != "" && !strings.HasPrefix(o.pgURL, "postgres://") && !strings.HasPrefix(o.pgURL, "postgresql://") {
		return nil, fmt.Errorf("%s %s: want a URL such as postgres://user@127.0.0.1:5432/db", o.pgFrom, cli.QuoteArg(o.pgURL))
	}
	if len(names) == 0 {
		o.scenarios = scenarios
		return o, nil
	}
	for _, n := range names {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %s (known: %s)", cli.QuoteArg(n), scenarioNames())
		}
		if !slices.ContainsFunc(o.scenarios, func(s scenario) bool { return s.name == n }) {
			o.scenarios = append(o.scenarios, scenarios[i])
		}
	}
	return o, nil
}

func scenarioNames() string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// run starts the servers, runs the scenarios and prints their verdicts.
func (o *options) run(ctx context.Context, stdout, stderr io.Writer) int {
	ctx, stop := cli.CancelOnStopSignals(ctx)
	defer stop()
	started := time.Now()

	env, err := startEnv(ctx, o, stderr)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "turnstile demo: %v while starting the servers; stopped what had started\n", context.Cause(ctx))
			return cli.InterruptCode(context.Cause(ctx))
		}
		fmt.Fprintf(stderr, "turnstile demo: %v\n", err)
		return cli.ExitUnavailable
	}
	defer env.Close()
	if o.metricsAddr != "" {
		mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		defer stop()
		obs, _, err := cli.ServeMetrics(mctx, o.metricsAddr, stderr)
		if errors.Is(err, cli.ErrMetricsListen) {
			fmt.Fprintf(stderr, "turnstile demo: %v\nRun \"turnstile demo -h\" for usage.\n", err)
			return cli.ExitUsage
		}
		if err != nil {
			fmt.Fprintf(stderr, "turnstile demo: %v\n", err)
			return cli.ExitUnavailable
		}
		env.clientOptions = append(env.clientOptions, obs)
	}

	var all []result
	failed := false
	for _, s := range o.scenarios {
		env.progress("%s: %s", s.name, s.summary)
		t0 := time.Now()
		rs, err := s.run(ctx, env)
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "turnstile demo: %v during %s; stopped its workers and the servers\n", context.Cause(ctx), s.name)
			return cli.InterruptCode(context.Cause(ctx))
		}
		if err != nil {
			failed = true
			fmt.Fprintf(stderr, "turnstile demo: %s: %v\n", s.name, err)
			rs = append(rs, result{Scenario: s.name, Variant: "error", Summary: err.Error()})
		}
		env.progress("%s: done in %v", s.name, time.Since(t0).Round(10*time.Millisecond))
		for i := range rs {
			rs[i].Scenario = s.name
			if !rs[i].Naive && !rs[i].OK {
				failed = true
			}
			if o.json {
				if _, err := fmt.Fprintln(stdout, rs[i].jsonLine()); err != nil {
					return cli.ExitUnavailable
				}
			}
		}
		all = append(all, rs...)
	}
	if !o.json {
		fmt.Fprintln(stdout, env.describe())
		fmt.Fprintln(stdout)
		writeTable(stdout, all)
		fmt.Fprintf(stdout, "\n%d scenarios in %v. ", len(o.scenarios), time.Since(started).Round(100*time.Millisecond))
		if failed {
			fmt.Fprintln(stdout, "A turnstile variant went WRONG: see above.")
		} else {
			fmt.Fprintln(stdout, "Every turnstile variant was right; the naive ones show what it prevents.")
		}
	}
	code := cli.ExitOK
	if failed {
		code = 1
	}
	if o.metricsAddr != "" {
		// Stay up so that Prometheus (or curl) can scrape what the runs
		// left in the metrics.
		fmt.Fprintln(stderr, "turnstile demo: done; still serving metrics until interrupted (Ctrl-C)")
		<-ctx.Done()
	}
	return code
}

func usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, `Usage: turnstile demo [SCENARIO...] [flags]

Run the incidents turnstile exists to prevent, each twice or more on the same
setup: the naive code that caused it, and the code using turnstile. Every run
ends in a verdict (ok or WRONG) with its figures. A naive run that happens to
be right is reported, not counted as a failure.

Scenarios (default: all, in this order):
`)
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  %-15s %s\n", s.name, s.summary)
	}
	b.WriteString(`
Flags:
  --json           print one JSON object per run on stdout (scenario,
                   variant, ok, naive and the figures) and nothing else;
                   progress still goes to stderr
`)
	b.WriteString(cli.BackendHelp(19, "the Redis server to run on, redis://[user:password@]host:port[/db], instead of starting one",
		"redis-server on a free loopback port when installed, an in-process Redis otherwise", "redis"))
	b.WriteString(`  --postgres URL   use this PostgreSQL server instead of starting one
  --postgres-file FILE
                   read the --postgres URL from FILE (keep a URL with a
                   password there: every local user can read a command line)
  --in-process     start no servers: use an in-process Redis (miniredis on a
                   loopback port) and no PostgreSQL
  --units N        units on sale in flash-sale (default 1000)
  --orders N       orders placed at once in flash-sale (default 3847, at
                   most 20000)
  --waiters N      waiters in herd, spread over 2 processes (default 2000,
                   at most 20000)
  --outage-ttl D   lease TTL in redlock-outage (default 1s, 200ms to 10s);
                   the switch grace is 2x, the breaker probes every 0.25x
                   and restarted nodes refuse locks for 1x
  --outage-phase D
                   how long redlock-outage's normal, fallback and
                   recovered phases last at least (default 3x the TTL,
                   50ms to 1h)
  --metrics-addr HOST:PORT
                   serve Prometheus metrics of the demo's own lock clients
                   at http://HOST:PORT/metrics; after the scenarios the demo
                   keeps serving them until interrupted (then it exits with
                   the verdict's status)

Without --backend (or $TURNSTILE_BACKEND), the demo starts redis-server on a
free loopback port when it is installed, and an in-process Redis otherwise;
without --postgres, it starts PostgreSQL when installed, and runs the
scenarios that would use it on Redis otherwise. It says which. Everything it starts stops when it exits,
also on Ctrl-C. On servers given with --backend or --postgres it leaves its
data behind: keys named demo:* and lock keys, and the tables
turnstile_demo_stock, turnstile_stock, turnstile_fences,
turnstile_idempotency, turnstile_demo_coupons, turnstile_coupons,
turnstile_demo_jobs, turnstile_jobs, turnstile_locks and turnstile_holds.
Give it scratch servers.

Exit status:
  0      every turnstile variant was right
  1      a turnstile variant was wrong, or a scenario failed to run
  64     usage error
  69     a server could not be started or reached
  128+N  interrupted by signal N (130 for Ctrl-C)
`)
	return b.String()
}
