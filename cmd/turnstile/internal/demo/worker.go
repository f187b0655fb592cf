//go:build unix

package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	serverproc "github.com/turnstilelock/turnstile/internal/proc"
)

// workerArg is the hidden first argument of "turnstile demo" that makes
// the process one of the demo's worker processes: the demo re-executes its
// own binary so that scenarios run in separate processes, with separate
// connections, as separate service instances would. It is not listed in any
// usage text.
const workerArg = "__worker"

// workerSpec tells a worker process what to do. It is passed as one JSON
// argument.
type workerSpec struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	Index    int    `json:"index"`
	// Redis and Postgres are the servers' URLs. They go to the worker in
	// its environment, which other users cannot read, not in the JSON
	// argument, which ps shows them.
	Redis    string          `json:"-"`
	Postgres string          `json:"-"`
	Params   json.RawMessage `json:"params,omitempty"`
}

// A workerFunc runs one worker's part of a scenario. It sets up, calls
// w.ready (which returns when every worker is set up and the demo says go),
// does its work and returns what the demo collects.
type workerFunc func(ctx context.Context, env *environment, spec workerSpec, w *workerLink) (any, error)

// workerFuncs are the worker parts of the scenarios that use processes.
var workerFuncs = map[string]workerFunc{
	"flash-sale": flashSaleWorker,
	"rider":      riderWorker,
	"gc-pause":   gcPauseWorker,
	"owner-id":   ownerIDWorker,
	"herd":       herdWorker,
}

// workerLink is a worker's line to the demo process: its stdout carries
// "ready", "progress N", "event JSON" and finally "result JSON" or
// "error TEXT"; its stdin carries "go".
type workerLink struct {
	mu  sync.Mutex
	out io.Writer
	in  *bufio.Reader
}

func (w *workerLink) send(kind, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, "%s %s\n", kind, payload)
}

// ready tells the demo this worker is set up and waits for its go.
func (w *workerLink) ready(ctx context.Context) error {
	w.send("ready", "")
	line, err := w.in.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "go" {
		return fmt.Errorf("worker: no go from the demo process: %w", errors.Join(err, ctx.Err()))
	}
	return nil
}

// progress reports how many units of work are done.
func (w *workerLink) progress(n int64) { w.send("progress", strconv.FormatInt(n, 10)) }

// event reports something the demo acts on while the worker runs.
func (w *workerLink) event(v any) {
	b, _ := json.Marshal(v)
	w.send("event", string(b))
}

// workerMain is the main function of a worker process.
func workerMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "turnstile demo: unknown scenario \""+workerArg+"\"")
		return cli.ExitUsage
	}
	var spec workerSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		fmt.Fprintf(stderr, "turnstile demo worker: bad spec: %v\n", err)
		return cli.ExitUsage
	}
	spec.Redis, spec.Postgres = os.Getenv(redisVar), os.Getenv(postgresVar)
	fn, ok := workerFuncs[spec.Scenario]
	if !ok {
		fmt.Fprintf(stderr, "turnstile demo worker: no worker for scenario %q\n", spec.Scenario)
		return cli.ExitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &workerLink{out: stdout, in: bufio.NewReader(os.Stdin)}
	fail := func(err error) int {
		w.send("error", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	env, err := connectEnv(ctx, spec.Redis, spec.Postgres, stderr)
	if err != nil {
		return fail(err)
	}
	defer env.Close()
	res, err := fn(ctx, env, spec, w)
	if err != nil {
		return fail(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fail(err)
	}
	w.send("result", string(b))
	return cli.ExitOK
}

// workerGroup is the worker processes of one run of a scenario.
type workerGroup struct {
	env    *environment
	procs  []*workerProc
	events chan workerEvent
}

// workerProc is one worker process as the demo sees it.
type workerProc struct {
	index  int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	exited chan struct{}
	done   atomic.Int64 // last progress reported

	mu     sync.Mutex
	result json.RawMessage
	err    error
}

// A workerEvent is an "event" line of a worker.
type workerEvent struct {
	index   int
	payload json.RawMessage
}

// startWorkers starts one worker process per spec and returns once each
// is set up (has said ready). The caller must Close the group.
func startWorkers(ctx context.Context, env *environment, specs []workerSpec) (*workerGroup, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to start workers: %w", err)
	}
	g := &workerGroup{env: env, events: make(chan workerEvent, 64)}
	for i := range specs {
		specs[i].Index = i
		specs[i].Redis, specs[i].Postgres = env.redisURL, env.pgURL
		arg, _ := json.Marshal(specs[i])
		p := &workerProc{index: i, ready: make(chan struct{}), exited: make(chan struct{})}
		p.cmd = exec.Command(exe, "demo", workerArg, string(arg))
		p.cmd.Env = append(os.Environ(), redisVar+"="+specs[i].Redis, postgresVar+"="+specs[i].Postgres)
		p.cmd.Stderr = env.stderr
		serverproc.DieWithParent(p.cmd)
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			g.Close()
			return nil, err
		}
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			g.Close()
			return nil, err
		}
		if err := p.cmd.Start(); err != nil {
			g.Close()
			return nil, fmt.Errorf("start worker: %w", err)
		}
		g.procs = append(g.procs, p)
		go g.read(p, out)
	}
	for _, p := range g.procs {
		select {
		case <-p.ready:
		case <-p.exited:
			err := p.failure()
			g.Close()
			return nil, err
		case <-ctx.Done():
			g.Close()
			return nil, ctx.Err()
		}
	}
	return g, nil
}

// read follows a worker's stdout until it exits.
func (g *workerGroup) read(p *workerProc, out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	readyOnce := sync.OnceFunc(func() { close(p.ready) })
	for sc.Scan() {
		kind, payload, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "ready":
			readyOnce()
		case "progress":
			if n, err := strconv.ParseInt(payload, 10, 64); err == nil {
				p.done.Store(n)
			}
		case "event":
			g.events <- workerEvent{p.index, json.RawMessage(payload)}
		case "result":
			p.mu.Lock()
			p.result = json.RawMessage(payload)
			p.mu.Unlock()
		case "error":
			p.mu.Lock()
			p.err = fmt.Errorf("worker %d: %s", p.index, payload)
			p.mu.Unlock()
		}
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	if p.result == nil && p.err == nil {
		p.err = fmt.Errorf("worker %d exited without a result: %v", p.index, err)
	}
	p.mu.Unlock()
	close(p.exited)
}

func (p *workerProc) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// pid is the worker's process id.
func (p *workerProc) pid() int { return p.cmd.Process.Pid }

// goAll tells every worker to start its work.
func (g *workerGroup) goAll() {
	for _, p := range g.procs {
		_, _ = io.WriteString(p.stdin, "go\n")
	}
}

// progress is the sum of the workers' progress counters.
func (g *workerGroup) progress() int64 {
	var n int64
	for _, p := range g.procs {
		n += p.done.Load()
	}
	return n
}

// wait waits for every worker to finish and decodes each result into
// results[i] (a pointer), in worker order.
func (g *workerGroup) wait(ctx context.Context, results ...any) error {
	var errs []error
	for i, p := range g.procs {
		select {
		case <-p.exited:
		case <-ctx.Done():
			g.Close()
			return ctx.Err()
		}
		if err := p.failure(); err != nil {
			errs = append(errs, err)
			continue
		}
		if i < len(results) {
			if err := json.Unmarshal(p.result, results[i]); err != nil {
				errs = append(errs, fmt.Errorf("worker %d: result: %w", i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Close kills every worker still running (also a stopped one: SIGKILL
// needs no SIGCONT) and waits until each has exited.
func (g *workerGroup) Close() {
	for _, p := range g.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		_ = p.cmd.Process.Kill()
		_ = p.stdin.Close()
	}
	for _, p := range g.procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
	}
}

// showProgress prints done/total on stderr every half second until stop is
// called; done is read with count.
func (e *environment) showProgress(label string, total int64, count func() int64) (stop func()) {
	return every(500*time.Millisecond, func() { e.progress("%s: %s/%s", label, num(count()), num(total)) })
}

// every calls f every d until stop is called, which returns once f has
// returned for the last time.
func every(d time.Duration, f func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { cancel(); <-finished }
}
