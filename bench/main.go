package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/render"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

func main() {
	if workload.ServeChild(append(libraries(true), nativeLibraries()...)) {
		return
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := benchmark
	if cfg.store != "redis" {
		run = benchmarkNative
	}
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// libraries are turnstile (at its defaults; with the short shared
// backoff, and over go-redis: variants, no peers) and, with peers, the libraries it is
// compared with.
func libraries(withPeers bool) []workload.Library {
	libs := []workload.Library{workload.Turnstile(), workload.TurnstileSharedBackoff(), workload.TurnstileGoRedis()}
	if withPeers {
		libs = append(libs, peers.All()...)
	}
	return libs
}

// benchmark starts the servers, runs the cells and writes the outputs.
func benchmark(ctx context.Context, cfg config, stdout, log io.Writer) error {
	if !redisproc.Available() {
		return redisproc.ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "turnstile-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wls := cfg.workloads()
	nodes, masters := 1, 0
	for _, w := range wls {
		if w.Cluster {
			masters = max(masters, w.Nodes)
		} else {
			nodes = max(nodes, w.Nodes)
		}
	}
	var servers []*redisproc.Server
	defer func() {
		for _, s := range servers {
			s.Kill()
		}
	}()
	for i := range nodes {
		d := filepath.Join(dir, fmt.Sprint("node", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		s, err := redisproc.Start(d)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	all := servers
	env := environment{single: servers[0].Addr()}
	for _, s := range servers {
		env.nodes = append(env.nodes, s.Addr())
	}
	if masters > 0 {
		cl, err := redisproc.StartCluster(filepath.Join(dir, "cluster"), masters)
		if err != nil {
			return err
		}
		defer cl.Kill()
		env.cluster = cl.Addrs()
		all = append(all[:len(all):len(all)], cl.Nodes()...)
	}
	env.flush = func() error {
		for _, s := range all {
			if _, err := s.Do("FLUSHALL"); err != nil {
				return fmt.Errorf("FLUSHALL on %s: %w", s.Addr(), err)
			}
		}
		return nil
	}
	version, _ := servers[0].Do("INFO", "server")
	rep := runCells(ctx, cfg, wls, env, log)
	rep.Notes = append(rep.Notes, machineNotes(cfg, "redis-server "+redisVersion(version), libraries(cfg.peers))...)
	rep.Notes = append(rep.Notes, "Server commands count everything INFO commandstats counts, commands run inside scripts included.")
	if cfg.note != "" {
		rep.Notes = append(rep.Notes, cfg.note)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return write(cfg.out, rep, stdout, log)
}

// environment is where the cells run.
type environment struct {
	single  string   // the single-node server
	nodes   []string // the Redlock servers; the first is single
	cluster []string // the Redis Cluster's masters, for cluster cells
	flush   func() error
	stats   func(addrs []string) (workload.Stats, error) // nil: Redis's INFO
}

// runCells runs every cell of the workloads wls, redis-benchmark and the
// scale cell as cfg says. A cell that fails is reported in the report's problems and the
// run goes on.
func runCells(ctx context.Context, cfg config, wls []workload.Workload, env environment, log io.Writer) render.Report {
	rep := render.Report{Title: "turnstile against the Go Redis lock libraries", Started: time.Now()}
	problem := func(err error) {
		fmt.Fprintln(log, "bench:", err)
		rep.Problems = append(rep.Problems, err.Error())
	}
	if cfg.limit {
		for _, p := range []int{1, 16} {
			fmt.Fprintf(log, "redis-benchmark -P %d ...\n", p)
			n := cfg.limitRequests
			if p > 1 {
				n *= 4 // pipelined: four times the requests in about the same time
			}
			l, err := workload.Limit(ctx, env.single, n, p)
			if err != nil {
				problem(err)
				break
			}
			rep.Limits = append(rep.Limits, l)
		}
	}
	runWorkloads(ctx, cfg, wls, libraries(cfg.peers), env, &rep, log, problem)
	if ctx.Err() != nil {
		return rep
	}
	if cfg.scale && ctx.Err() == nil {
		if err := env.flush(); err != nil {
			problem(err)
			return rep
		}
		fmt.Fprintf(log, "holding %d leases, TTL %v ...\n", cfg.scaleLeases, cfg.scaleTTL)
		s, err := workload.Scale(ctx, "redis://"+env.single, env.single, cfg.scaleLeases, cfg.scaleTTL)
		if err != nil {
			problem(err)
		} else {
			rep.Scale = &s
		}
	}
	return rep
}

// runWorkloads runs every cell of the workloads wls through libs, the
// libraries in alternating order from one workload to the next, and adds
// the results (or the problems) to rep.
func runWorkloads(ctx context.Context, cfg config, wls []workload.Workload, libs []workload.Library, env environment, rep *render.Report, log io.Writer, problem func(error)) {
	for i, w := range wls {
		order := libs
		if i%2 == 1 { // alternate: no library always runs first
			order = make([]workload.Library, len(libs))
			for j, l := range libs {
				order[len(libs)-1-j] = l
			}
		}
		for _, lib := range order {
			if (w.Cluster && lib.OpenCluster == nil) || (!w.Cluster && w.Nodes > 1 && !lib.MultiNode) {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			if err := env.flush(); err != nil {
				problem(err)
				continue
			}
			addrs := []string{env.single}
			switch {
			case w.Cluster:
				addrs = env.cluster[:w.Nodes]
			case w.Nodes > 1:
				addrs = env.nodes[:w.Nodes]
			}
			fmt.Fprintf(log, "%-27s %-24s ", w.ID(), lib.Name)
			res, err := workload.Run(ctx, workload.Cell{Workload: w, Library: lib, Addrs: addrs, Duration: cfg.duration, Stats: env.stats})
			if err != nil {
				fmt.Fprintln(log)
				problem(err)
				continue
			}
			fmt.Fprintf(log, "%9.0f acq/s  p50 %8.0f µs  p99 %8.0f µs  %5.2f cmds/acq  %6.0f srv µs/acq  %d errors\n", res.PerSecond, res.P50Micros, res.P99Micros, res.CommandsPerAcq, res.ServerCPUMicrosPerAcq, res.Errors)
			if res.WritesPerAcq > 0 {
				fmt.Fprintf(log, "%55s %5.2f writes/acq  %5.2f fsyncs/acq  %v\n", "", res.WritesPerAcq, res.SyncsPerAcq, perAcq(res.PerAcq))
			}
			if res.Errors > 0 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s %s: %d errors, the first: %s", res.ID, res.Library, res.Errors, res.Error))
			}
			if res.Acquisitions == 0 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s %s: no lock acquired in %v", res.ID, res.Library, cfg.duration))
			}
			rep.Cells = append(rep.Cells, res)
		}
	}
}

// write prints the table and writes the three files to dir.
func write(dir string, rep render.Report, stdout, log io.Writer) error {
	if err := render.Table(stdout, rep); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := []struct {
		name string
		fn   func(io.Writer, render.Report) error
	}{{"results.jsonl", render.JSONLines}, {"table.txt", render.Table}, {"report.html", render.HTML}}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		err = f.fn(fh, rep)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintln(log, "wrote", path)
	}
	return nil
}

// machineNotes are the report's first notes: the machine, the server
// (e.g. "redis-server 7.0.15") and how each library in libs runs.
func machineNotes(cfg config, server string, libs []workload.Library) []string {
	host, _ := os.Hostname()
	notes := []string{
		fmt.Sprintf("%s %s/%s, %d CPUs (GOMAXPROCS %d), host %s; %s on loopback, started by the run.", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), host, server),
		fmt.Sprintf("Each cell runs %v after a warm-up; every library runs as its users run it:", cfg.duration),
	}
	for _, l := range libs {
		notes = append(notes, l.Settings+".")
	}
	return notes
}

func redisVersion(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "(unknown version)"
}

// config is the command line.
type config struct {
	duration      time.Duration
	only          *regexp.Regexp
	peers         bool
	quick         bool
	out           string
	note          string
	limit         bool
	limitRequests int
	scale         bool
	scaleLeases   int
	scaleTTL      time.Duration
	waiters       int
	hold          time.Duration
	store         string // "redis": the side-by-side run; else a nativeStore's name
}

func (c config) workloads() []workload.Workload {
	var out []workload.Workload
	all := workload.SideBySide(c.waiters, c.hold)
	if c.store != "redis" {
		all = workload.NativeRecipe()
	}
	for _, w := range all {
		if c.only == nil || c.only.MatchString(w.ID()) {
			out = append(out, w)
		}
	}
	return out
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var (
		c     config
		only  string
		scale string
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "how long each cell runs (--quick: 1s unless given)")
	fs.StringVar(&only, "only", "", "run only the workloads whose id matches this regular expression, e.g. 'uncontended', 'clients' or 'herd|contended-8'; ids: "+ids())
	fs.BoolVar(&c.peers, "peers", true, "run the peer libraries (redsync, redislock, rueidislock, rueidislock-km1) too")
	fs.BoolVar(&c.quick, "quick", false, "short cells, a short redis-benchmark, no held-lease scale cell: under 2 minutes")
	fs.StringVar(&c.out, "out", defaultOut(), "directory for results.jsonl, table.txt and report.html")
	fs.StringVar(&c.note, "note", "", "a line about the run to print in the report, e.g. 'taken on a busy machine'")
	fs.BoolVar(&c.limit, "limit", true, "measure Redis's own capacity with redis-benchmark")
	fs.StringVar(&scale, "scale", "", "hold --scale-leases leases under one client's watchdog: true or false (default: true, false with --quick)")
	fs.IntVar(&c.scaleLeases, "scale-leases", 1_000_000, "leases the scale cell holds")
	fs.DurationVar(&c.scaleTTL, "scale-ttl", 2*time.Minute, "lease TTL of the scale cell; the leases are held for one TTL, three renewal periods, and renewed every TTL/3: the server must run leases÷(TTL/3) renewal scripts per second")
	fs.IntVar(&c.waiters, "herd", 500, "waiters in the herd workloads (a multiple of 10: they are split over 10 clients and over 10 processes)")
	fs.DurationVar(&c.hold, "hold", time.Millisecond, "how long a herd waiter holds the lock")
	fs.StringVar(&c.store, "store", "redis", "redis: turnstile against the Go Redis lock libraries; "+storeHelp())
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.limitRequests = 200_000
	c.scale = !c.quick
	if c.quick {
		c.limitRequests = 40_000
		if !set["duration"] {
			c.duration = time.Second
		}
	}
	if _, ok := nativeStoreNamed(c.store); !ok && c.store != "redis" {
		return c, fmt.Errorf("--store %q: %w; want one of %s", c.store, errUnknownStore, strings.Join(storeNames(), ", "))
	}
	switch scale {
	case "":
	case "true":
		c.scale = true
	case "false":
		c.scale = false
	default:
		return c, fmt.Errorf("--scale %q: want true or false", scale)
	}
	switch {
	case c.duration <= 0:
		return c, fmt.Errorf("--duration %v: must be positive", c.duration)
	case c.scaleLeases < 1:
		return c, fmt.Errorf("--scale-leases %d: must be at least 1", c.scaleLeases)
	case c.scaleTTL < 100*time.Millisecond:
		return c, fmt.Errorf("--scale-ttl %v: must be at least 100ms", c.scaleTTL)
	case c.waiters < 10 || c.waiters%10 != 0:
		return c, fmt.Errorf("--herd %d: must be a positive multiple of 10 (the waiters are split over 10 clients and over 10 processes)", c.waiters)
	case c.hold <= 0:
		return c, fmt.Errorf("--hold %v: must be positive", c.hold)
	case c.out == "":
		return c, errors.New("--out: empty directory")
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return c, fmt.Errorf("--only: %w", err)
		}
		c.only = re
		if len(c.workloads()) == 0 {
			return c, fmt.Errorf("--only %q matches no workload; ids: %s", only, ids())
		}
	}
	return c, nil
}

// ids lists the workloads' ids with the default --herd.
func ids() string {
	var s []string
	for _, w := range workload.SideBySide(500, time.Millisecond) {
		s = append(s, w.ID())
	}
	return strings.Join(s, ", ")
}

// defaultOut is bench/report of the checkout when run from the bench
// directory or the repository root, else ./report.
func defaultOut() string {
	if _, err := os.Stat(filepath.Join("bench", "go.mod")); err == nil {
		return filepath.Join("bench", "report")
	}
	return "report"
}
