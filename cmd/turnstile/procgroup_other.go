//go:build !unix

package main

import (
	"os"
	"syscall"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// On systems without POSIX process groups "turnstile run" still runs the
// command and passes its exit code through, but a lost lease can stop only
// the command's main process, not the processes it started.

var forwardedSignals = cli.StopSignals

func groupAttr(int, bool) *syscall.SysProcAttr { return nil }

func signalGroup(pid int, sig os.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		if sig != os.Interrupt {
			sig = os.Kill
		}
		_ = p.Signal(sig)
	}
}

func groupAlive(int) bool { return false }

func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitCannotRun
	}
	return ps.ExitCode()
}

func foregroundTerminal() (int, bool) { return 0, false }

func holdTerminalInBackground() func(int) { return func(int) {} }
