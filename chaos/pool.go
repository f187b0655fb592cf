package main

import (
	"bufio"
	"encoding/json"
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
	delay   time.Duration  // the workers' lock delay (0: none)
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
		Register: p.register, AcquireTimeout: 3 * p.s.TTL, LongHold: p.longFor, LockDelay: p.delay})
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
			p.changedNow()
		}
		return
	}
	switch e.Ev {
	case evAcquired:
		p.holding[e.W] = true
		p.grants++
		p.changedNow()
	case evHold:
		p.inHold[e.W] = "short"
		if e.Op == "long" {
			p.inHold[e.W] = "long"
		}
		p.changedNow()
	case evWrite, evCWrite:
		if _, ok := p.inHold[e.W]; ok {
			delete(p.inHold, e.W)
			p.changedNow()
		}
	case evReleased:
		p.holding[e.W] = false
		if _, ok := p.inHold[e.W]; ok {
			delete(p.inHold, e.W)
			p.changedNow()
		}
	}
}

// history is every event recorded so far.
func (p *workers) history() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event(nil), p.events...)
}

// changedNow wakes whoever waits for a change (await); p.mu is held.
func (p *workers) changedNow() {
	close(p.changed)
	p.changed = make(chan struct{})
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
