package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Process is the running server process of a launcher's Server: the
// controls every launcher offers (PID, Pause, Resume, Paused) and a Kill
// that waits until the process has exited. Its zero value holds no
// process. A Server embeds it, so that those controls are the Server's;
// the Server's own Kill, which may also wait for its port or remove its
// files, hides Process.Kill.
type Process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan struct{} // closed once the process has exited
	paused bool            // stopped by Pause
}

// Started records cmd, started by Start (which returned exited), as p's
// running process, not paused. (It is a function rather than a method so
// that it is not promoted to the Servers that embed a Process.)
func Started(p *Process, cmd *exec.Cmd, exited <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmd, p.exited, p.paused = cmd, exited, false
}

// PID is the process id of the running server, or 0 after Kill.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Pause stops the server and every process it started (a PostgreSQL
// postmaster's backends, for one) with SIGSTOP: its clients and peers
// keep their connections, but it answers none of them, nor sends
// heartbeats, until Resume — as during a long garbage-collection pause.
func (p *Process) Pause() error { return p.signal(Pause, true) }

// Resume continues a paused server and every process it started.
func (p *Process) Resume() error { return p.signal(Resume, false) }

// signal calls send (Pause or Resume) on the running process and
// records whether it is now paused.
func (p *Process) signal(send func(pid int) error, paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return ErrNotRunning
	}
	if err := send(p.cmd.Process.Pid); err != nil {
		return err
	}
	p.paused = paused
	return nil
}

// Paused reports whether the server was stopped by Pause.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Running reports whether p's server runs and is not paused: whether it
// can answer.
func Running(p *Process) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.paused
}

// Kill stops the server with SIGKILL, as a crash does, and waits until it
// has exited; it reports false when no server was running. The processes
// the server started and Pause stopped are continued first, so that they
// notice its death and exit rather than outlive it stopped (PostgreSQL's
// backends would hold the killed postmaster's shared memory); the server
// itself stays stopped until SIGKILL ends it.
func (p *Process) Kill() bool {
	p.mu.Lock()
	cmd, exited, paused := p.cmd, p.exited, p.paused
	p.cmd, p.exited, p.paused = nil, nil, false
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	if paused {
		resumeDescendants(cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	if exited != nil {
		<-exited
	}
	return true
}

// Poll calls f every interval until it returns nil, for at most timeout:
// it returns nil once f has, or f's last error when timeout has passed.
func Poll(timeout, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}

// Ports picks free loopback ports, each different from those it picked
// before: the ports of the members of one cluster, which a freshly
// freed port picked twice would make collide.
type Ports struct {
	used map[int]bool
}

// Free returns a free loopback port that p has not returned before.
func (p *Ports) Free() (int, error) {
	if p.used == nil {
		p.used = map[int]bool{}
	}
	for range 20 {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port")
}

// StartAll calls start for every member at once and waits for them all:
// the members of a cluster that answers only once a quorum has formed
// must start together. It returns the members' errors joined.
func StartAll[T any](members []T, start func(T) error) error {
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { errs[i] = start(m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Retry calls f up to attempts times, waiting wait after each failure,
// until it returns nil: a server restarted on its old ports may find
// them not yet released, or its old processes not yet gone. It returns
// nil once f has, or f's last error.
func Retry(attempts int, wait time.Duration, f func() error) error {
	var err error
	for range attempts {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(wait)
	}
	return err
}

// Restart calls start, the start of a killed server, up to attempts
// times, waiting wait after each failure, until it returns nil (see
// Retry: the killed server's ports may not be released yet, nor its
// processes gone). The error of the last attempt says that name's
// restart failed.
func Restart(name string, attempts int, wait time.Duration, start func() error) error {
	if err := Retry(attempts, wait, start); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

// OnFreePorts sets every port in ports to a free loopback port, each a
// different one, and calls start, up to attempts times: a port that was
// free when picked may be taken before the server binds it, and a
// failed start is retried on other ports. It returns nil once start
// has, or the last error.
func OnFreePorts(attempts int, start func() error, ports ...*int) error {
	var err error
	for range attempts {
		if err = pickPorts(ports); err != nil {
			continue
		}
		if err = start(); err == nil {
			return nil
		}
	}
	return err
}

// pickPorts sets every port in ports to a free loopback port, each a
// different one.
func pickPorts(ports []*int) error {
	var free Ports
	for _, p := range ports {
		port, err := free.Free()
		if err != nil {
			return err
		}
		*p = port
	}
	return nil
}

// StartGroup starts a group of n servers that know each other's ports
// (a cluster, an ensemble) with start, in the existing directory dir,
// server i keeping its files in dir/memberDir(i). A port that was free
// when picked may be taken before a server binds it, and every server's
// ports are in every other's configuration: a failed start is retried,
// up to 3 times, with every port picked again and each server's
// directory removed, so that the next attempt's servers start afresh.
func StartGroup[T any](dir string, n int, memberDir func(i int) string, start func() (T, error)) (T, error) {
	var group T
	if _, err := os.Stat(dir); err != nil {
		return group, err
	}
	err := Retry(3, 0, func() (err error) {
		if group, err = start(); err != nil {
			for i := range n {
				_ = os.RemoveAll(filepath.Join(dir, memberDir(i)))
			}
		}
		return err
	})
	return group, err
}
