package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile"
)

// straggler polling: after the command's main process exits following a
// lost lease, its process group is checked this often until it is empty or
// the grace period ends.
const stragglerPoll = 20 * time.Millisecond

// supervise runs the command while lease is held and returns its exit
// code, and whether the lease was lost while it ran. It passes signals from
// sigs on to the command's process group, and stops the group if the lease
// is lost.
func (o *runOptions) supervise(ctx context.Context, lease *turnstile.Lease, sigs <-chan os.Signal, stdout, stderr io.Writer) (code int, lost bool) {
	if lease.Context().Err() != nil {
		fmt.Fprintf(stderr, "turnstile run: lease on %q lost before the command started: %s\n", o.key, describe(context.Cause(lease.Context())))
		return exitLeaseLost, true
	}
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Env = append(os.Environ(),
		"TURNSTILE_KEY="+lease.Key(),
		"TURNSTILE_TOKEN="+strconv.FormatUint(lease.Token(), 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Only matters when stdout or stderr is not a file (in-process use):
	// a background grandchild holding the pipe must not keep us waiting.
	cmd.WaitDelay = time.Second
	tty, foreground := foregroundTerminal()
	cmd.SysProcAttr = groupAttr(tty, foreground)
	// The parent-death signal is tied to the thread that started the
	// command (see groupAttr): keep that thread until the command is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "turnstile run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound, false
		}
		return exitCannotRun, false
	}
	if foreground {
		restore := holdTerminalInBackground()
		defer func() { restore(tty) }()
	}

	pgid := cmd.Process.Pid // the command leads its own process group
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()

	leaseDone, ctxDone := lease.Context().Done(), ctx.Done()
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			code = exitStatus(cmd.ProcessState)
			if !lost && lease.Context().Err() != nil {
				lost = true
				fmt.Fprintf(stderr, "turnstile run: lease on %q lost as the command exited: %s\n", o.key, describe(context.Cause(lease.Context())))
			}
			if lost && kill != nil {
				awaitGroup(pgid, kill)
			}
			return code, lost
		case s := <-sigs:
			signalGroup(pgid, s)
		case <-ctxDone:
			ctxDone = nil
			signalGroup(pgid, syscall.SIGTERM)
		case <-leaseDone:
			leaseDone, lost = nil, true
			fmt.Fprintf(stderr, "turnstile run: lease on %q lost: %s; stopping the command (SIGTERM now, SIGKILL in %v)\n",
				o.key, describe(context.Cause(lease.Context())), o.grace)
			signalGroup(pgid, syscall.SIGTERM)
			t := time.NewTimer(o.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			signalGroup(pgid, syscall.SIGKILL)
		}
	}
}

// awaitGroup waits until every process of the group is gone, or kill
// fires and the rest get SIGKILL: the main process may exit on SIGTERM
// while children it started still work on the resource.
func awaitGroup(pgid int, kill <-chan time.Time) {
	tick := time.NewTicker(stragglerPoll)
	defer tick.Stop()
	for groupAlive(pgid) {
		select {
		case <-kill:
			signalGroup(pgid, syscall.SIGKILL)
			return
		case <-tick.C:
		}
	}
}
