package pgproc

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// PID is the process id of the running postmaster, or 0 after Kill.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause stops the postmaster and every backend with SIGSTOP: clients keep
// their connections, but nothing answers until Resume.
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

// Restart kills the postmaster with SIGKILL, as a crash does, and starts
// it again on the same port with the same data directory: committed rows
// survive (the server recovers from its write-ahead log), sessions and
// their advisory locks do not. It returns once the server accepts
// connections. (Kill, unlike Restart, also removes the files.)
func (s *Server) Restart() error {
	s.stop()
	bin, err := lookPath("postgres")
	if err != nil {
		return err
	}
	cred, err := credential(s.dir)
	if err != nil {
		return err
	}
	// Until the killed postmaster's backends have noticed and exited,
	// they hold its shared memory and a new postmaster refuses to start.
	for range 50 {
		if err = s.start(bin, filepath.Join(s.dir, "data"), cred); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restart postgres: %w", err)
}
