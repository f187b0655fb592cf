//go:build !linux

package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// startCommand starts the command directly. Without Linux's
// child-subreaper and parent-death signal there is no reliable way here to
// stop its processes should turnstile itself be killed (SIGKILL, the OOM
// killer): they keep running, and the lease expires after its TTL.
// afterStart is called once the command has started.
func startCommand(argv, env []string, stdout, stderr io.Writer, tty int, foreground bool, afterStart func()) (*job, int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Only matters when stdout or stderr is not a file (in-process use):
	// a background grandchild holding the pipe must not keep us waiting.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = groupAttr(tty, foreground)
	if err := cmd.Start(); err != nil {
		return nil, startFailureCode(err), err
	}
	afterStart()
	j := &job{pgid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		j.code = exitStatus(cmd.ProcessState)
		close(j.exited)
	}()
	j.signal = func(sig syscall.Signal) { signalGroup(j.pgid, sig) }
	j.alive = func() bool { return groupAlive(j.pgid) }
	j.finish = func(kill bool) {
		if kill {
			signalGroup(j.pgid, syscall.SIGKILL)
		}
		<-j.exited
	}
	return j, 0, nil
}
