package redisproc

import (
	"os/exec"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// process is the server process a Server embeds: its PID, Pause, Resume
// and Paused are the Server's (see proc.Process).
type process = proc.Process

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
	if err := s.checkAppendOnly(); err != nil {
		return nil, err
	}
	return s.startOnFreePort()
}

// Clock is the wrong clock the server runs under, or nil.
func (s *Server) Clock() *proc.Clock { return s.clock }

// running reports whether the server runs and is not paused: whether it
// can answer.
func (s *Server) running() bool { return proc.Running(&s.process) }
