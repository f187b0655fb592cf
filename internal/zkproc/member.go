package zkproc

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// PID is the process id of the running server (the JVM), or 0 after
// Kill.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause stops the server with SIGSTOP: its clients and peers keep their
// connections, but it answers none of them, nor pings its peers, until
// Resume — as during a long garbage-collection pause.
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

// Restart kills the server if it runs and starts it again on the same
// ports with the same data directory, so that it keeps its data and, in
// an ensemble, rejoins as the same server. It returns once the server
// grants sessions, which a member of an ensemble does once it has
// joined a quorum again.
func (s *Server) Restart() error {
	s.Kill()
	var err error
	for range 5 {
		if s.member != nil {
			err = s.startMember()
		} else {
			err = s.start()
		}
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restart zookeeper: %w", err)
}
