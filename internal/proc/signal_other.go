//go:build !unix

package proc

import "errors"

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
