package mysqlproc

import "github.com/turnstilelock/turnstile/internal/proc"

var _ proc.Member = (*Server)(nil)

// PID is the process id of the running server, or 0 after Kill.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause stops the server with SIGSTOP: clients keep their connections,
// but nothing answers until Resume.
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
