package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// settings are the knobs of one run.
type settings struct {
	Stores   []string      // store configurations, by name (stores())
	Faults   []string      // faults, by name (faults())
	Duration time.Duration // how long each store × fault cell injects faults
	Workers  int           // workload processes per cell
	Keys     int           // keys each worker locks side by side (0: 1)
	TTL      time.Duration // the lease TTL the workers use
	Hold     time.Duration // the pause between a critical section's read and write
	Dir      string        // where servers keep their files
	Log      io.Writer     // progress, for people
	History  string        // if set, each cell's events go to HISTORY/<store>-<fault>.jsonl
}

// cell is the outcome of one store × fault run.
type cell struct {
	Store    string        `json:"store"`
	Config   string        `json:"config"`
	Fault    string        `json:"fault"`
	Skipped  string        `json:"skipped,omitempty"` // why the fault does not apply to the store
	Fenced   bool          `json:"fenced_safe"`       // zero violations of the fenced register
	Verdict  verdict       `json:"verdict"`
	Faults   int           `json:"faults_injected"`
	Wall     time.Duration `json:"-"`
	WallSecs float64       `json:"wall_s"`
	Error    string        `json:"error,omitempty"` // the cell could not run
}

// run runs every store × fault cell of s, calling each cell's result to
// done as it ends.
func run(ctx context.Context, s settings, done func(cell)) error {
	regDir := filepath.Join(s.Dir, "register")
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		return err
	}
	reg, err := redisproc.Start(regDir)
	if err != nil {
		return fmt.Errorf("the register's redis-server: %w", err)
	}
	defer reg.Kill()
	all := stores()
	kinds := faults()
	for _, name := range s.Stores {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st, ok := all[name]
		if !ok {
			return fmt.Errorf("unknown store %q", name)
		}
		fmt.Fprintf(s.Log, "== %s: starting %s\n", name, st.config)
		dir := filepath.Join(s.Dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		t, err := st.start(dir, s.TTL)
		if err != nil {
			for _, f := range s.Faults {
				done(cell{Store: name, Config: st.config, Fault: f, Error: err.Error()})
			}
			continue
		}
		for _, fname := range s.Faults {
			f, ok := kinds[fname]
			if !ok {
				t.close()
				return fmt.Errorf("unknown fault %q", fname)
			}
			c := cell{Store: name, Config: st.config, Fault: fname}
			if why := f.applies(t); why != "" {
				c.Skipped = why
				done(c)
				continue
			}
			start := time.Now()
			r, err := runCell(ctx, s, t, f, reg.Addr())
			if err != nil {
				c.Error = err.Error()
			} else {
				c.Verdict, c.Faults = r.verdict, r.injected
				c.Fenced = r.verdict.Violations() == 0 && r.verdict.Linearizable != "unknown"
			}
			c.Wall = time.Since(start)
			c.WallSecs = float64(c.Wall.Round(100*time.Millisecond)) / 1e9
			done(c)
		}
		t.close()
	}
	return nil
}

type cellResult struct {
	verdict  verdict
	injected int
}

// runCell starts the workers on a fresh key, injects f again and again
// for s.Duration, lets the store recover, stops the workers and checks
// what they saw.
func runCell(ctx context.Context, s settings, t *target, f fault, register string) (cellResult, error) {
	key := fmt.Sprintf("chaos-%s-%d", f.name, time.Now().UnixNano())
	lease := t.lease(s.TTL)
	// A long hold outlasts the fault by a lease, so that the lock can
	// pass to another worker meanwhile, and by 2 s more: on a busy
	// machine a restart or a grant can take that long.
	pool := &workers{s: s, t: t, key: key, register: register, longFor: f.length(lease) + lease + 2*time.Second}
	defer pool.stopAll()
	for range s.Workers {
		if err := pool.start(); err != nil {
			return cellResult{}, err
		}
	}
	// The first grant shows that every worker opened the store: faults
	// count from there, not from a client's start-up.
	if err := pool.waitGrants(ctx, s.Workers, time.Minute); err != nil {
		return cellResult{}, err
	}
	env := &faultEnv{t: t, pool: pool, ttl: lease, log: s.Log}
	var windows []window
	end := time.Now().Add(s.Duration)
	for time.Now().Before(end) && ctx.Err() == nil {
		sleepCtx(ctx, steadyFor(s.TTL))
		if f.long {
			// Not finding one is no reason to skip the fault.
			_, _ = pool.longHolder(ctx, 10*lease)
		}
		inject := time.Now().UnixNano()
		env.cut = 0
		heal, err := f.inject(ctx, env)
		if err != nil {
			return cellResult{}, fmt.Errorf("%s: %w", f.name, err)
		}
		w := window{Inject: inject, Cut: env.cut}
		if heal != nil {
			sleepCtx(ctx, f.length(lease))
			w.CutEnd = time.Now().UnixNano()
			if err := heal(); err != nil {
				return cellResult{}, fmt.Errorf("heal %s: %w", f.name, err)
			}
		}
		w.Heal = time.Now().UnixNano()
		if w.Cut != 0 && w.CutEnd == 0 {
			w.CutEnd = w.Heal
		}
		windows = append(windows, w)
	}
	// After the last heal the store must grant again within the bound.
	bound := recoveryBound(lease)
	pool.waitGrantAfter(ctx, windows[len(windows)-1].Heal, bound)
	// The workers stop asking for locks now: the liveness check counts
	// up to here, not the time they take to finish.
	runEnd := time.Now().UnixNano()
	pool.stopAll()

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{register}, DisableCache: true})
	if err != nil {
		return cellResult{}, err
	}
	defer rc.Close()
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	finals := make([]finals, max(s.Keys, 1))
	for k := range finals {
		lk := laneKey(key, k)
		if finals[k].fenced, err = readInt(rctx, rc, fencedKey(lk)); err != nil {
			return cellResult{}, fmt.Errorf("read the fenced register of %s: %w", lk, err)
		}
		if finals[k].control, err = readInt(rctx, rc, controlKey(lk)); err != nil {
			return cellResult{}, fmt.Errorf("read the control register of %s: %w", lk, err)
		}
	}
	events := pool.history()
	if s.History != "" {
		if err := writeHistory(filepath.Join(s.History, t.name+"-"+f.name+".jsonl"), events, windows); err != nil {
			return cellResult{}, err
		}
	}
	v := checkKeys(events, windows, finals, bound, runEnd)
	return cellResult{verdict: v, injected: len(windows)}, nil
}

// writeHistory writes the events of a cell, and its fault windows as
// events "inject" and "heal" (and "cut" and "cut-end", window.Cut), as
// JSON lines in time order.
func writeHistory(path string, events []event, windows []window) error {
	all := append([]event(nil), events...)
	for _, w := range windows {
		all = append(all, event{Ev: "inject", Start: w.Inject}, event{Ev: "heal", Start: w.Heal})
		if w.Cut != 0 {
			all = append(all, event{Ev: "cut", Start: w.Cut}, event{Ev: "cut-end", Start: w.CutEnd})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	var b bytes.Buffer
	for _, e := range all {
		line, _ := json.Marshal(e)
		b.Write(append(line, '\n'))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// steadyFor is the quiet time before each fault: long enough for the
// workers to be granted the lock a few times.
func steadyFor(ttl time.Duration) time.Duration { return max(ttl, 500*time.Millisecond) }

// recoveryBound is how long after a fault heals a grant must come: a
// lease left by a killed or partitioned holder runs out within a TTL, and
// a client's reconnection and backoff take a few seconds more.
func recoveryBound(ttl time.Duration) time.Duration { return 2*ttl + 10*time.Second }

func sleepCtx(ctx context.Context, d time.Duration) { sleep(ctx, d) }

// workers are the workload processes of one cell.
type workers struct {
	s        settings
	t        *target
	key      string
	register string

	mu      sync.Mutex
	nextID  int
	procs   map[int]*worker
	events  []event
	holding map[int]bool   // worker → granted and not yet released
	inHold  map[int]string // worker → "short" or "long" while between its reads and writes
	longFor time.Duration  // the long hold the runner can ask for
	grants  int
	changed chan struct{} // closed and replaced on every grant and hold, and when a hold ends
}

type worker struct {
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	paused bool
}

// start launches one more workload process: this very binary, told by
// the environment to be a worker.
func (p *workers) start() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.procs == nil {
		p.procs, p.holding, p.inHold, p.changed = map[int]*worker{}, map[int]bool{}, map[int]string{}, make(chan struct{})
	}
	p.nextID++
	id := p.nextID
	p.mu.Unlock()
	cfg, _ := json.Marshal(workerConfig{ID: id, URL: p.t.url, Key: p.key, Keys: p.s.Keys, TTL: p.s.TTL, Hold: p.s.Hold,
		Register: p.register, AcquireTimeout: 3 * p.s.TTL, LongHold: p.longFor})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(cfg))
	proc.DieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = &prefixWriter{w: p.s.Log, prefix: fmt.Sprintf("worker %d: ", id)}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a worker: %w", err)
	}
	w := &worker{id: id, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	p.mu.Lock()
	p.procs[id] = w
	p.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				p.record(e)
			}
		}
		_ = cmd.Wait()
		close(w.exited)
	}()
	return nil
}

func (p *workers) record(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
	if e.K != 0 {
		// Faults aim at the holders of the first key; the others only
		// count their grants.
		if e.Ev == evAcquired {
			p.grants++
			close(p.changed)
			p.changed = make(chan struct{})
		}
		return
	}
	switch e.Ev {
	case evAcquired:
		p.holding[e.W] = true
		p.grants++
		close(p.changed)
		p.changed = make(chan struct{})
	case evHold:
		p.inHold[e.W] = "short"
		if e.Op == "long" {
			p.inHold[e.W] = "long"
		}
		close(p.changed)
		p.changed = make(chan struct{})
	case evWrite, evCWrite:
		if _, ok := p.inHold[e.W]; ok {
			delete(p.inHold, e.W)
			close(p.changed)
			p.changed = make(chan struct{})
		}
	case evReleased:
		p.holding[e.W] = false
		if _, ok := p.inHold[e.W]; ok {
			delete(p.inHold, e.W)
			close(p.changed)
			p.changed = make(chan struct{})
		}
	}
}

func (p *workers) history() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event(nil), p.events...)
}

// waitGrants waits until n grants have been recorded.
func (p *workers) waitGrants(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		got, ch := p.grants, p.changed
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("no lock granted to the workers within %v (%d of %d grants): %s", timeout, got, n, p.lastError())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitGrantAfter waits, at most bound, until every key has a grant that
// returned after at (Unix ns).
func (p *workers) waitGrantAfter(ctx context.Context, at int64, bound time.Duration) {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	keys := max(p.s.Keys, 1)
	for {
		p.mu.Lock()
		ch := p.changed
		granted := map[int]bool{}
		for i := len(p.events) - 1; i >= 0 && len(granted) < keys; i-- {
			if e := p.events[i]; e.Ev == evAcquired && e.End >= at {
				granted[e.K] = true
			}
		}
		p.mu.Unlock()
		if len(granted) >= keys {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (p *workers) lastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.events) - 1; i >= 0; i-- {
		if p.events[i].Err != "" {
			return p.events[i].Err
		}
	}
	return "no worker reported an error"
}

// inSection returns a worker that holds the lock and is between reading
// the registers and writing them (want "short" or "long"; "" for either),
// waiting up to timeout for one.
func (p *workers) inSection(ctx context.Context, want string, timeout time.Duration) (*worker, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ch := p.changed
		for id, h := range p.inHold {
			if w := p.procs[id]; w != nil && !w.paused && (want == "" || h == want) {
				p.mu.Unlock()
				return w, nil
			}
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return nil, errors.New("no worker was in a critical section within " + timeout.String())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// longHolder asks the workers for a long hold and waits until one is in
// it: a fault injected then finds a holder between its reads and its
// writes, and keeps it there until after the fault.
func (p *workers) longHolder(ctx context.Context, timeout time.Duration) (*worker, error) {
	// A long hold from the fault before may still run (it outlasts its
	// fault): the new one must begin afresh, and not follow it at once
	// after this fault healed.
	if err := p.noLongHold(ctx, timeout); err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, w := range p.procs {
		_, _ = io.WriteString(w.stdin, "long\n")
	}
	p.mu.Unlock()
	w, err := p.inSection(ctx, "long", timeout)
	// One long hold is enough: the others go back to short ones.
	p.mu.Lock()
	for _, o := range p.procs {
		if o != w {
			_, _ = io.WriteString(o.stdin, "short\n")
		}
	}
	p.mu.Unlock()
	return w, err
}

// noLongHold waits until no worker is in a long hold, up to timeout.
func (p *workers) noLongHold(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ch, busy := p.changed, false
		for id, h := range p.inHold {
			busy = busy || (h == "long" && p.procs[id] != nil)
		}
		p.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return errors.New("a long hold did not end within " + timeout.String())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *workers) signal(w *worker, sig syscall.Signal) error {
	p.mu.Lock()
	w.paused = sig == syscall.SIGSTOP
	p.mu.Unlock()
	return w.cmd.Process.Signal(sig)
}

// kill SIGKILLs w, forgets it, and starts a replacement so that the
// cell keeps its number of workers.
func (p *workers) kill(w *worker) error {
	_ = w.cmd.Process.Kill()
	<-w.exited
	p.mu.Lock()
	delete(p.procs, w.id)
	delete(p.holding, w.id)
	delete(p.inHold, w.id)
	p.mu.Unlock()
	return p.start()
}

// stopAll resumes paused workers, closes their stdin (they finish the
// section they are in and exit) and kills those that do not exit.
func (p *workers) stopAll() {
	p.mu.Lock()
	procs := make([]*worker, 0, len(p.procs))
	for _, w := range p.procs {
		procs = append(procs, w)
	}
	p.procs = map[int]*worker{}
	p.mu.Unlock()
	for _, w := range procs {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.stdin.Close()
	}
	for _, w := range procs {
		select {
		case <-w.exited:
		case <-time.After(30 * time.Second):
			fmt.Fprintf(p.s.Log, "worker %d did not exit within 30 s of being told to; killed\n", w.id)
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	}
}

// prefixWriter prefixes each write (a worker's stderr line) for the log.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	_, err := pw.w.Write(append([]byte(pw.prefix), b...))
	return len(b), err
}
