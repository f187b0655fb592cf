package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// Limits of the "turnstile bench" flags: beyond them a run would take
// hours or measure nothing.
const (
	defaultBenchDuration = 3 * time.Second
	maxBenchDuration     = 10 * time.Minute
	defaultBenchWaiters  = 2000
	maxBenchWaiters      = 20000
	maxBenchHold         = time.Second
)

// benchOptions is a parsed and checked "turnstile bench" command line.
type benchOptions struct {
	url      string // "": start redis-servers of its own
	urlFrom  string // where url came from: "--url", "--backend-file F", ...
	target   benchTarget
	duration time.Duration
	waiters  int
	hold     time.Duration
	json     bool
	html     string
	// cells are the cells to run, in order; skipped says why a selected
	// workload cannot run on the target.
	cells   []benchCell
	skipped []string
}

// benchCell is one workload of the run and where it runs.
type benchCell struct {
	workload workload.Workload
	redlock  bool // over the target's Redlock, not its single Redis
}

func parseBench(args []string) (*benchOptions, error) {
	o := &benchOptions{}
	fs := cli.NewFlagSet("bench")
	backend := cli.BackendFlags{Want: benchURLForms}
	backend.Register(fs, "url", "backend")
	var only string
	fs.StringVar(&only, "only", "", "")
	duration := durationFlag(defaultBenchDuration)
	fs.Var(&duration, "duration", "")
	fs.IntVar(&o.waiters, "waiters", defaultBenchWaiters, "")
	hold := durationFlag(time.Millisecond)
	fs.Var(&hold, "hold", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.StringVar(&o.html, "html", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %s (turnstile bench takes flags only)", cli.QuoteArg(fs.Arg(0)))
	}
	url, from, err := backend.Resolve(os.Getenv)
	if err != nil {
		if errors.Is(err, cli.ErrEmptyURL) {
			err = fmt.Errorf("%w (omit it to run on redis-servers started for the run)", err)
		}
		return nil, err
	}
	o.url, o.urlFrom = url, from
	o.duration, o.hold = time.Duration(duration), time.Duration(hold)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.duration <= 0 || o.duration > maxBenchDuration:
		return nil, fmt.Errorf("--duration %v is outside (0, %v]", o.duration, maxBenchDuration)
	case o.waiters < 2 || o.waiters > maxBenchWaiters:
		return nil, fmt.Errorf("--waiters %d is outside [2, %d]", o.waiters, maxBenchWaiters)
	case o.hold <= 0 || o.hold > maxBenchHold:
		return nil, fmt.Errorf("--hold %v is outside (0, %v]", o.hold, maxBenchHold)
	case set["html"] && o.html == "":
		return nil, errors.New("--html must name a file")
	}
	if o.html != "" {
		if fi, err := os.Stat(filepath.Dir(o.html)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--html %s: directory %s does not exist", o.html, filepath.Dir(o.html))
		}
	}
	if o.url != "" {
		t, err := parseBenchURL(o.url, o.urlFrom)
		if err != nil {
			return nil, err
		}
		o.target = t
	}
	var re *regexp.Regexp
	if only != "" {
		var err error
		if re, err = regexp.Compile(only); err != nil {
			return nil, fmt.Errorf("--only %q is not a regular expression: %v", only, err)
		}
	}
	o.plan(re)
	if len(o.cells) == 0 {
		if len(o.skipped) > 0 {
			return nil, fmt.Errorf("--only %q selects no workload that can run here: %s", only, strings.Join(o.skipped, "; "))
		}
		return nil, fmt.Errorf("--only %q matches no workload; ids: %s", only, strings.Join(o.ids(), ", "))
	}
	return o, nil
}

// plan picks the workloads of workload.Suite that this run can do and
// only selects (nil: all), in the suite's order.
func (o *benchOptions) plan(only *regexp.Regexp) {
	for _, w := range workload.Suite(o.waiters, o.hold) {
		c, ok := o.shape(w)
		switch {
		case only != nil && !only.MatchString(c.workload.ID()):
		case ok:
			o.cells = append(o.cells, c)
		case w.Processes <= 1:
			o.skipped = append(o.skipped, w.ID()+" skipped: it needs a Redlock, --url redlock://HOST1,HOST2,... of 2 or more nodes (or no --url)")
		}
	}
}

// shape fits a workload of the suite to the target, and reports whether
// it can run there: the single-node ones count commands on every host of
// the URL, and the Redlock one runs over all of the Redlock's nodes and
// is named after their number. The suite's multi-process herd does not
// run here.
func (o *benchOptions) shape(w workload.Workload) (benchCell, bool) {
	own := o.url == ""
	switch {
	case w.Processes > 1:
		return benchCell{workload: w}, false
	case w.Nodes == 1:
		if !own {
			w.Nodes = len(o.target.singleAddrs)
		}
		return benchCell{workload: w}, true
	case own:
		w.Nodes = ownNodes
	case o.target.redlock != "":
		w.Nodes = len(o.target.redlockAddrs)
		w.Name = "redlock-" + strconv.Itoa(w.Nodes)
	default:
		return benchCell{workload: w}, false
	}
	return benchCell{workload: w, redlock: true}, true
}

// ids lists the workloads a run can select with --only.
func (o *benchOptions) ids() []string {
	var ids []string
	for _, w := range workload.Suite(o.waiters, o.hold) {
		if c, _ := o.shape(w); w.Processes <= 1 {
			ids = append(ids, c.workload.ID())
		}
	}
	return ids
}

// ownServers is how many redis-servers a run without --url starts: one,
// and five when the Redlock cell runs (the first serves both).
func (o *benchOptions) ownServers() int {
	for _, c := range o.cells {
		if c.redlock {
			return ownNodes
		}
	}
	return 1
}

// benchBackendHelp is the help of bench's --backend, --url and
// --backend-file.
func benchBackendHelp() string {
	return cli.BackendHelp(20, "the server to measure, redis://[user:password@]host:port[/db] "+
		"(rediss:// for TLS; ?prefix=P puts every key under P; several hosts: one Redis Cluster, whose commands are counted on the hosts listed) "+
		"or redlock://host1:port1,host2:port2,...[/db] (single-node cells on its first node, the Redlock cell on all)",
		"redis-server processes of its own on free loopback ports (five for the Redlock cell), stopped when it exits (redis-server must be installed)",
		"url")
}

func benchUsage() string {
	var b strings.Builder
	fmt.Fprintf(&b, `Usage: turnstile bench [flags]

Measure turnstile's locks on your own Redis: throughput, latency and the
commands each acquisition costs, with the workloads of turnstile's benchmark
(bench/ in the repository), turnstile only. Every worker of a cell loops
acquire, hold, release for --duration, after a warm-up; cells run one after
another.

Workloads (--only selects them by id):
  uncontended/c=1, c=16, c=64, c=256
                    1 to 256 workers, a distinct random key per acquisition
  contended-8/c=64  64 workers on 8 hot keys, released at once
  contended-1/c=64  64 workers on one hot key
  redlock-5/c=64    64 workers, distinct keys, over a Redlock: the nodes of
                    --backend redlock://... (named redlock-N for N nodes; at
                    least 2), or 5 servers of its own without --backend;
                    skipped, with a note, when --backend is a redis:// URL
  %-17s --waiters workers on one key, each holding it --hold,
                    in this process (bench/ also runs it over 10 processes)

Flags:
%s  --only REGEX      run only the workloads whose id matches, e.g.
                    'uncontended' or 'herd|contended-1' (default: all)
  --duration D      how long each cell runs (default %v, at most %v)
  --waiters N       workers of the herd cell (default %d, at most %d)
  --hold D          how long a herd worker holds the lock (default 1ms, at
                    most %v)
  --json            print one JSON object per cell on stdout (the fields of
                    bench/workload.Result) as each cell ends, instead of the
                    table
  --html FILE       also write an HTML report with charts to FILE
Durations are written like 200ms, 3s or 1m.

Columns: acquisitions (lock+release pairs) per second; acquire latency p50,
p99, p99.9 in ms (waiting included); fairness: fewest/most acquisitions of
one worker and Jain's index (1 is even); server commands and scripts per
acquisition, from INFO commandstats read on every node before and after the
cell; the servers' CPU time per acquisition in µs and the server cores it
kept busy, from INFO cpu (every client's commands and CPU count: run it on a
quiet server); for the herd, the handoff gap: (time - sum of holds) /
acquisitions.

It loads the server: up to 256 workers lock as fast as the server lets them
(the herd's waiters take turns on one key). Point it at a production server
only when it can take that. Every key it touches is under {bench:RANDOM:...}
(RANDOM new for each cell, after the URL's prefix), so it cannot collide
with real locks: the lock keys are released, and their fencing-token keys
expire 10s after (by default; the URL's fence_grace). It needs permission
for INFO (ACL: +info) besides the lock scripts. Ctrl-C stops the cell
running, releases its locks and prints the cells measured so far.

Examples:
  turnstile bench
  turnstile bench --url redis://127.0.0.1:6379 --only 'uncontended|contended-1'
  turnstile bench --url 'redis://bench:secret@redis.internal:6379/2?prefix=perf:' --duration 10s
  turnstile bench --url redlock://redis1:6379,redis2:6379,redis3:6379 --only redlock
  turnstile bench --only herd --waiters 5000 --hold 2ms --json > herd.jsonl
  turnstile bench --html report.html

Exit status:
  0      every cell ran without errors
  1      a cell failed or counted lock errors (listed under "problems"), or
         the output could not be written
  64     usage error
  69     redis-server is not installed (without --url), or the server could
         not be started, reached or read (INFO refused)
  128+N  interrupted by signal N (130 for Ctrl-C), after printing what was
         measured
`, "herd/c="+strconv.Itoa(defaultBenchWaiters), benchBackendHelp(), defaultBenchDuration, maxBenchDuration, defaultBenchWaiters, maxBenchWaiters, maxBenchHold)
	return b.String()
}
