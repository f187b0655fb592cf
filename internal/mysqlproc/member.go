package mysqlproc

import "github.com/turnstilelock/turnstile/internal/proc"

var _ proc.Member = (*Server)(nil)

// process is the server process a Server embeds: its PID, Pause, Resume
// and Paused are the Server's (see proc.Process).
type process = proc.Process
