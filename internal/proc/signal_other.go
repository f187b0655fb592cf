//go:build !unix

package proc

import (
	"errors"
	"os"
)

const (
	sigStop = 0
	sigCont = 0
)

// signalTree has no equivalent without Unix signals: pausing a server
// needs SIGSTOP.
func signalTree(pid int, _ int) error {
	if pid <= 0 {
		return ErrNotRunning
	}
	return errors.ErrUnsupported
}

// resumeDescendants has nothing to continue where Pause is unsupported.
func resumeDescendants(int) {}

// KillTree kills the process pid with os.Process.Kill: without /proc the
// processes it started are not found.
func KillTree(pid int) error {
	if pid <= 0 {
		return ErrNotRunning
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
