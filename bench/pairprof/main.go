// Command pairprof measures where an uncontended acquire+release pair's
// time goes, turnstile beside the peers, on one redis-server it starts
// itself on loopback: interleaved passes of the uncontended workload,
// each library in each pass (their order alternating), with the median
// pairs/s and acquire p50 of every library and its ratio to turnstile in
// the same pass; the server's time per command from INFO commandstats
// (CONFIG RESETSTAT before each cell); the client's allocations and
// garbage collections per pair; and, on request, a CPU profile, an
// execution trace, and block and mutex profiles of the whole run, in
// which every worker of a library carries the pprof label lib=<name>
// (go tool pprof -tagfocus lib=turnstile).
//
//	cd bench && go run ./pairprof --workers 1 --passes 5 --duration 2s
//	go run ./pairprof --workers 1 --passes 1 --cpuprofile cpu.out --trace trace.out
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

type config struct {
	workers  []int
	passes   int
	duration time.Duration
	libs     *regexp.Regexp
	cpu      string
	trace    string
	block    string
	mutex    string
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		err = run(cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pairprof:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("pairprof", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.String("workers", "1", "comma-separated worker counts, e.g. 1,16")
	passes := fs.Int("passes", 5, "interleaved passes: every library runs once per pass and worker count")
	duration := fs.Duration("duration", 2*time.Second, "how long each cell runs")
	libs := fs.String("libs", "^(turnstile|turnstile-goredis|redsync|redislock)$", "regular expression of the libraries to run")
	cpu := fs.String("cpuprofile", "", "write a CPU profile of the whole run here")
	tr := fs.String("trace", "", "write an execution trace of the whole run here")
	block := fs.String("blockprofile", "", "write a block profile (every blocking event) here")
	mutex := fs.String("mutexprofile", "", "write a mutex profile (every contention) here")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	cfg := config{passes: *passes, duration: *duration, cpu: *cpu, trace: *tr, block: *block, mutex: *mutex}
	for w := range strings.SplitSeq(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			return config{}, fmt.Errorf("--workers: %q is not a positive number", w)
		}
		cfg.workers = append(cfg.workers, n)
	}
	if cfg.passes < 1 || cfg.duration <= 0 {
		return config{}, fmt.Errorf("--passes and --duration must be positive")
	}
	re, err := regexp.Compile(*libs)
	if err != nil {
		return config{}, fmt.Errorf("--libs: %w", err)
	}
	cfg.libs = re
	return cfg, nil
}

func libraries(re *regexp.Regexp) []workload.Library {
	var out []workload.Library
	for _, l := range append([]workload.Library{workload.Turnstile(), workload.TurnstileGoRedis()}, peers.All()...) {
		if re.MatchString(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// cell is one library's figures in one pass.
type cell struct {
	perSecond, p50   float64
	allocs, bytes    float64 // per pair
	gcs              uint32
	cmds             map[string]stat
	acquisitions     int64
	commandsPerPair  float64
	serverCPUPerPair float64
}

func run(cfg config, out io.Writer) error {
	if !redisproc.Available() {
		return redisproc.ErrNotInstalled
	}
	libs := libraries(cfg.libs)
	if len(libs) == 0 {
		return fmt.Errorf("--libs matches no library")
	}
	dir, err := os.MkdirTemp("", "turnstile-pairprof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := redisproc.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Kill()
	stop, err := profile(cfg)
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	for _, workers := range cfg.workers {
		w := workload.Workload{Name: "uncontended", Concurrency: workers, Nodes: 1}
		got := map[string][]cell{}
		for pass := range cfg.passes {
			order := slices.Clone(libs)
			if pass%2 == 1 {
				slices.Reverse(order)
			}
			for _, lib := range order {
				c, err := measure(ctx, srv, w, lib, cfg.duration)
				if err != nil {
					return fmt.Errorf("%s %s: %w", w.ID(), lib.Name, err)
				}
				got[lib.Name] = append(got[lib.Name], c)
			}
		}
		report(out, w, libs, got, load())
	}
	return nil
}

func measure(ctx context.Context, srv *redisproc.Server, w workload.Workload, lib workload.Library, d time.Duration) (cell, error) {
	if _, err := srv.Do("FLUSHALL"); err != nil {
		return cell{}, err
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		return cell{}, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var res workload.Result
	var err error
	pprof.Do(ctx, pprof.Labels("lib", lib.Name), func(ctx context.Context) {
		res, err = workload.Run(ctx, workload.Cell{Workload: w, Library: lib, Addrs: []string{srv.Addr()}, Duration: d})
	})
	runtime.ReadMemStats(&m1)
	if err != nil {
		return cell{}, err
	}
	if res.Errors > 0 {
		return cell{}, fmt.Errorf("%d errors, the first: %s", res.Errors, res.Error)
	}
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		return cell{}, err
	}
	// The warm-up and the library's set-up count in the allocations too:
	// a few dozen pairs against tens of thousands measured.
	n := float64(max(res.Acquisitions, 1))
	return cell{
		perSecond: res.PerSecond, p50: res.P50Micros,
		allocs: float64(m1.Mallocs-m0.Mallocs) / n, bytes: float64(m1.TotalAlloc-m0.TotalAlloc) / n,
		gcs: m1.NumGC - m0.NumGC, cmds: parseStats(info), acquisitions: res.Acquisitions,
		commandsPerPair: res.CommandsPerAcq, serverCPUPerPair: res.ServerCPUMicrosPerAcq,
	}, nil
}

// profile starts the profiles cfg asks for; stop writes them.
func profile(cfg config) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	if cfg.cpu != "" {
		f, err := os.Create(cfg.cpu)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, err
		}
		closers = append(closers, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if cfg.trace != "" {
		f, err := os.Create(cfg.trace)
		if err != nil {
			return stop, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return stop, err
		}
		closers = append(closers, func() { trace.Stop(); f.Close() })
	}
	for _, p := range []struct{ file, name string }{{cfg.block, "block"}, {cfg.mutex, "mutex"}} {
		if p.file == "" {
			continue
		}
		if p.name == "block" {
			runtime.SetBlockProfileRate(1)
		} else {
			runtime.SetMutexProfileFraction(1)
		}
		closers = append(closers, func() {
			f, err := os.Create(p.file)
			if err != nil {
				fmt.Fprintln(os.Stderr, "pairprof:", err)
				return
			}
			defer f.Close()
			_ = pprof.Lookup(p.name).WriteTo(f, 0)
		})
	}
	return stop, nil
}

// load is the machine's load average, for the report.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
