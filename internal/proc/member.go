package proc

import "errors"

// Member is the control a fault-injection test has over one launched
// server process: every launcher's Server (and the members of its
// clusters) offers it.
type Member interface {
	// PID is the process id of the running server, or 0 when it is not
	// running (killed, or never started).
	PID() int
	// Pause stops the server with SIGSTOP, as a long garbage-collection
	// pause or a frozen virtual machine would: it keeps its sockets and
	// its peers' connections, but answers nothing until Resume.
	Pause() error
	// Resume continues a paused server with SIGCONT.
	Resume() error
	// Kill stops the server with SIGKILL, as a crash does, and waits
	// until it has exited.
	Kill()
	// Restart kills the server if it runs and starts it again on the same
	// ports with the same data directory, and returns once it answers.
	Restart() error
}

// ErrNotRunning is what Pause and Resume return for a server that is not
// running.
var ErrNotRunning = errors.New("server is not running")

// Pause stops the process pid and every process it started (a PostgreSQL
// postmaster's backends, for one) with SIGSTOP.
func Pause(pid int) error { return signalTree(pid, sigStop) }

// Resume continues the process pid and every process it started with
// SIGCONT.
func Resume(pid int) error { return signalTree(pid, sigCont) }
