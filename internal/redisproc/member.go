package redisproc

import (
	"fmt"
	"os/exec"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// An Option changes how StartWith (or StartClusterWith, for every node)
// runs a server.
type Option func(*Server)

// WithClock runs the server under clock, a wrong wall clock that the
// caller moves while the server runs (see proc.Clock): Redis then
// expires keys, and answers TIME, by the clock's time.
func WithClock(clock *proc.Clock) Option {
	return func(s *Server) { s.clock = clock }
}

// StartWith runs redis-server as Start does, changed by opts.
func StartWith(dir string, opts ...Option) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{bin: bin, dir: dir}
	for _, o := range opts {
		o(s)
	}
	var lastErr error
	for range 5 {
		if s.port, lastErr = proc.FreePort(); lastErr != nil {
			continue
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

// Clock is the wrong clock the server runs under, or nil.
func (s *Server) Clock() *proc.Clock { return s.clock }

// PID is the process id of the running server, or 0 after Kill.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause stops the server with SIGSTOP: its clients' and its peers'
// connections stay open, but it answers nothing until Resume.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return proc.ErrNotRunning
	}
	if err := proc.Pause(s.cmd.Process.Pid); err != nil {
		return err
	}
	s.paused = true
	return nil
}

// Resume continues a paused server.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return proc.ErrNotRunning
	}
	if err := proc.Resume(s.cmd.Process.Pid); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// Paused reports whether the server was stopped by Pause.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// running reports whether the server runs and is not paused: whether it
// can answer.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && !s.paused
}
