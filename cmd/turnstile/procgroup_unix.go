//go:build unix

package main

import (
	"os"
	"syscall"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// forwardedSignals are passed on to the command's process group: the
// signals that stop every turnstile command (see cli.StopSignals).
var forwardedSignals = cli.StopSignals

// groupAttr puts the command in a process group of its own, so that
// signalling the group reaches the processes it starts too. With
// foreground, the group also becomes the terminal's foreground group, as a
// shell does for a job: otherwise the command would be stopped (SIGTTIN)
// the moment it read from the terminal.
//
// Where the system can (Linux), the command also gets SIGKILL if the
// process that started it dies: on Linux that is turnstile's supervisor
// (see startCommand), which stops the command's whole group in turn if
// turnstile itself dies.
func groupAttr(tty int, foreground bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if foreground {
		attr = &syscall.SysProcAttr{Foreground: true, Ctty: tty}
	}
	setParentDeathSignal(attr)
	return attr
}

// signalGroup sends sig to every process of the group. A group that is
// already gone is not an error.
func signalGroup(pgid int, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok || pgid <= 0 {
		return
	}
	_ = syscall.Kill(-pgid, s)
}

// exitStatus is the command's status as a shell reports it: its exit code,
// or 128+N if signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitCannotRun
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}
