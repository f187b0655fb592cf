package zkproc

import (
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// process is the server process a Server embeds: its PID, Pause, Resume
// and Paused are the Server's (see proc.Process).
type process = proc.Process

// Restart kills the server if it runs and starts it again on the same
// ports with the same data directory, so that it keeps its data and, in
// an ensemble, rejoins as the same server. It returns once the server
// grants sessions, which a member of an ensemble does once it has
// joined a quorum again.
func (s *Server) Restart() error {
	s.Kill()
	start := s.start
	if s.member != nil {
		start = s.startMember
	}
	return proc.Restart("zookeeper", 5, 100*time.Millisecond, start)
}
