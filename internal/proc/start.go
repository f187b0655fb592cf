package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Start starts cmd and waits until ready reports true, polling every
// poll for at most timeout. If the process exits first, the error carries
// the end of its log file; if it is not ready in time, it is killed. The
// returned channel is closed once the process has exited, so Kill can
// wait for it.
func Start(cmd *exec.Cmd, name, logPath string, timeout, poll time.Duration, ready func() bool) (<-chan struct{}, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited: %v: %s", name, waitErr, tail(string(log), 2000))
		default:
		}
		if ready() {
			return exited, nil
		}
		time.Sleep(poll)
	}
	_ = cmd.Process.Kill()
	<-exited
	return nil, errors.New(name + " was not ready within " + timeout.String())
}

// OpenLog opens a server's log file for appending, creating it if
// needed: a restarted server adds to the log of its earlier runs, so that
// what it said before a crash is still there to read after.
func OpenLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

// tail returns the last n bytes of a log, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
