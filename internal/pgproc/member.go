package pgproc

import (
	"path/filepath"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// process is the server process a Server embeds: its PID, Pause, Resume
// and Paused are the Server's (see proc.Process).
type process = proc.Process

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
	return proc.Restart("postgres", 50, 100*time.Millisecond, func() error {
		return s.start(bin, filepath.Join(s.dir, "data"), cred)
	})
}
