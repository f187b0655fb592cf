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

// A job is the command started under the lease (see startCommand).
type job struct {
	// pgid is the command's process group: the command's main process
	// leads it.
	pgid int
	// exited is closed when the command's main process has exited; code
	// and err are set before.
	exited chan struct{}
	// code is the command's exit status as a shell reports it.
	code int
	// err, if not nil, says why code is not the command's own status.
	err error
	// finish is called once the command is over, and lets go of what
	// startCommand set up. Processes the command left running are left
	// alone.
	finish func()
}

// supervise runs the command while lease is held and returns its exit
// code, and whether the lease was lost while it ran. It passes signals from
// sigs on to the command's process group, and stops the group if the lease
// is lost.
func (o *runOptions) supervise(ctx context.Context, lease *turnstile.Lease, sigs <-chan os.Signal, stdout, stderr io.Writer) (code int, lost bool) {
	if lease.Context().Err() != nil {
		fmt.Fprintf(stderr, "turnstile run: lease on %q lost before the command started: %s\n", o.key, describe(context.Cause(lease.Context())))
		return exitLeaseLost, true
	}
	env := append(os.Environ(),
		"TURNSTILE_KEY="+lease.Key(),
		"TURNSTILE_TOKEN="+strconv.FormatUint(lease.Token(), 10))
	env = append(env, o.env...)
	tty, foreground := foregroundTerminal()
	// A parent-death signal is tied to the thread that started the process
	// (see groupAttr and startCommand): keep that thread until the command
	// is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var restore func(tty int)
	j, code, err := startCommand(o.argv, env, stdout, stderr, tty, foreground, func() {
		if foreground {
			restore = holdTerminalInBackground()
		}
	})
	if restore != nil {
		defer restore(tty)
	}
	if err != nil {
		fmt.Fprintf(stderr, "turnstile run: %v\n", err)
		return code, false
	}
	defer j.finish()

	pgid := j.pgid
	leaseDone, ctxDone := lease.Context().Done(), ctx.Done()
	var kill <-chan time.Time
	for {
		select {
		case <-j.exited:
			code = j.code
			if j.err != nil {
				fmt.Fprintf(stderr, "turnstile run: %v\n", j.err)
			}
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

// startFailureCode is the exit status for a command that could not be
// started, as in sh: 127 if it was not found, else 126.
func startFailureCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotRun
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
