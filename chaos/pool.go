package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// workers are the workload processes of one cell.
type workers struct {
	s        settings
	url      string // the store's, as the workers open it
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
	cfg, _ := json.Marshal(workerConfig{ID: id, URL: p.url, Key: p.key, Keys: p.s.Keys, TTL: p.s.TTL, Hold: p.s.Hold,
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
