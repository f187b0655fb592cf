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

// stragglerPoll: once the command's main process has exited while it was
// being stopped, its remaining processes are checked this often until none
// is left or the grace period ends.
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
	// signal sends sig to every process of the command: its process group
	// and, where the system lets turnstile find them (Linux), the
	// processes descended from it that left the group (setsid, a
	// double-forking daemon).
	signal func(sig syscall.Signal)
	// alive reports whether a process of the command, in its group or
	// escaped from it, still runs.
	alive func() bool
	// finish is called once the command's main process is over, and lets
	// go of what startCommand set up. With kill, every process of the
	// command still running gets SIGKILL first, and finish returns once
	// they are gone; without, processes the command left running are left
	// alone.
	finish func(kill bool)
}

// stopStage is how far stopping the command has gone.
type stopStage int

const (
	// notStopping: nothing asked the command to stop; once it exits,
	// processes it left in the background are left alone.
	notStopping stopStage = iota
	// asked: a signal to turnstile (or the end of its context) was passed
	// on; the command decides when to exit. What it leaves behind is then
	// stopped with the grace period.
	asked
	// graceful: SIGTERM was sent and the grace period runs; SIGKILL
	// follows when it ends.
	graceful
	// killed: every process of the command got SIGKILL.
	killed
)

// supervise runs the command while lease is held and returns its exit
// code, and whether the lease was lost while it ran. It passes signals from
// sigs on to the command's processes, and stops them if the lease is lost.
// Whenever the command is stopped — lease lost, a signal, the end of ctx —
// none of its processes outlives supervise: those still running when the
// main process exits get SIGTERM, then SIGKILL after the grace period.
func (o *runOptions) supervise(ctx context.Context, lease *turnstile.Lease, sigs <-chan os.Signal, stdout, stderr io.Writer) (code int, lost bool) {
	if lease.Context().Err() != nil {
		fmt.Fprintf(stderr, "turnstile run: lease on %q lost before the command started: %s\n", o.key, describe(context.Cause(lease.Context())))
		return exitLeaseLost, true
	}
	env := append(childEnviron(os.Environ(), o.passBackend, o.backend),
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
	stage := notStopping
	defer func() { j.finish(stage != notStopping) }()

	leaseDone, ctxDone := lease.Context().Done(), ctx.Done()
	var kill <-chan time.Time
	grace := time.NewTimer(o.grace)
	grace.Stop()
	defer grace.Stop()
	startGrace := func() {
		stage = graceful
		j.signal(syscall.SIGTERM)
		grace.Reset(o.grace)
		kill = grace.C
	}
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
			if lost && stage < graceful {
				stage = asked
			}
			if stage == asked && j.alive() {
				startGrace()
			}
			if stage == graceful {
				awaitJob(j, kill)
			}
			return code, lost
		case s := <-sigs:
			if stage == notStopping {
				stage = asked
			}
			if ss, ok := s.(syscall.Signal); ok {
				j.signal(ss)
			}
		case <-ctxDone:
			ctxDone = nil
			if stage == notStopping {
				stage = asked
			}
			j.signal(syscall.SIGTERM)
		case <-leaseDone:
			leaseDone, lost = nil, true
			fmt.Fprintf(stderr, "turnstile run: lease on %q lost: %s; stopping the command (SIGTERM now, SIGKILL in %v)\n",
				o.key, describe(context.Cause(lease.Context())), o.grace)
			if stage < graceful {
				startGrace()
			}
		case <-kill:
			kill, stage = nil, killed
			j.signal(syscall.SIGKILL)
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

// awaitJob waits until every process of the job is gone, or kill fires
// and the rest get SIGKILL: the main process may exit on SIGTERM while
// processes it started still work on the resource.
func awaitJob(j *job, kill <-chan time.Time) {
	tick := time.NewTicker(stragglerPoll)
	defer tick.Stop()
	for j.alive() {
		select {
		case <-kill:
			j.signal(syscall.SIGKILL)
			return
		case <-tick.C:
		}
	}
}
