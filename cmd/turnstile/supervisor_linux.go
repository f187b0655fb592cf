package main

// "turnstile run" on Linux starts the command through a supervisor: turnstile
// runs itself again in a hidden mode (supervisorArg), and that process
// starts the command. The supervisor is a child subreaper, so every process
// descended from the command stays its descendant, even one that left the
// command's process group (setsid, a double-forking daemon). It outlives
// turnstile: if turnstile dies by any signal while the command runs
// (SIGKILL, the OOM killer), the supervisor SIGKILLs the command's process
// group and every process descended from the command, so that nothing
// keeps working on a lock that nobody renews. It does the same when
// turnstile stops the command (lease lost, a signal, the grace period
// over). See "turnstile run: the command dies with the lock" in
// docs/design.md.
//
// Between the two processes there are two pipes:
//   - life (fd 3 of the supervisor): turnstile holds the only write end and
//     writes orders, one per line: "signal N" (send signal N to the
//     command's processes outside its group: the group turnstile signals
//     itself), then "release" (the command is over: exit and leave alone
//     what it left running in the background) or "kill" (SIGKILL every
//     process of the command, then exit). End of file before "release" or
//     "kill" means turnstile died.
//   - report (fd 4): the supervisor writes "started PID", or "failed CODE
//     MESSAGE" if the command could not be started, then "exited CODE"
//     with the command's status as a shell reports it.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supervisorArg, as the first argument, runs the supervisor instead of the
// command line. It is not a command users type.
const supervisorArg = "__supervise"

// The orders turnstile writes on the life pipe (see above).
const (
	orderRelease = "release"
	orderKill    = "kill"
	orderSignal  = "signal" // "signal N"
)

// The supervisor mode is picked up here rather than in main so that a test
// binary, which runs "turnstile run" in-process and re-executes itself for
// the supervisor, serves it too.
func init() {
	if len(os.Args) > 1 && os.Args[1] == supervisorArg {
		code := supervisorMain(os.Args[2:])
		// Exit at once: there is nothing to flush, and the supervisor must
		// not linger after turnstile let it go.
		syscall.Exit(code)
	}
}

// startCommand starts the supervisor, which starts the command, and
// returns once the command has started or failed to. afterStart is called
// once the supervisor has started, before the command takes the terminal.
func startCommand(argv, env []string, stdout, stderr io.Writer, tty int, foreground bool, afterStart func()) (*job, int, error) {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, exitCannotRun, fmt.Errorf("cannot start the command's supervisor: %w", err)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, exitCannotRun, fmt.Errorf("cannot start the command's supervisor: %w", err)
	}
	mode := "background"
	if foreground {
		mode = "foreground"
	}
	cmd := &exec.Cmd{
		Path: selfExecutable(),
		// The name turnstile was started as, so that ps shows what it is.
		Args:   append([]string{os.Args[0], supervisorArg, mode, "--"}, argv...),
		Env:    env, // passed on to the command unchanged
		Stdin:  os.Stdin,
		Stdout: stdout,
		Stderr: stderr,
		// Only matters when stdout or stderr is not a file (in-process
		// use): a background grandchild holding the pipe must not keep us
		// waiting.
		WaitDelay:  time.Second,
		ExtraFiles: []*os.File{lifeR, reportW},
		SysProcAttr: &syscall.SysProcAttr{
			// A process group of its own: signals to turnstile's job (kill
			// -9 %1) or to the command's group do not reach it.
			Setpgid: true,
			// Should the supervisor be stopped (SIGSTOP) when turnstile
			// dies, this wakes it to do its work.
			Pdeathsig: syscall.SIGCONT,
		},
	}
	err = cmd.Start()
	lifeR.Close()
	reportW.Close()
	if err != nil {
		lifeW.Close()
		reportR.Close()
		return nil, exitCannotRun, fmt.Errorf("cannot start the command's supervisor: %w", err)
	}
	afterStart()

	report := bufio.NewReader(reportR)
	line, _ := report.ReadString('\n')
	verb, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	pid, perr := strconv.Atoi(rest)
	if verb != "started" || perr != nil || pid <= 0 {
		lifeW.Close()
		reportR.Close()
		werr := cmd.Wait()
		if verb == "failed" {
			c, msg, _ := strings.Cut(rest, " ")
			if code, err := strconv.Atoi(c); err == nil {
				return nil, code, errors.New(msg)
			}
		}
		return nil, exitCannotRun, fmt.Errorf("the command's supervisor failed: %s", describeExit(werr, line))
	}

	supervisor := cmd.Process.Pid
	j := &job{pgid: pid, exited: make(chan struct{})}
	j.signal = func(sig syscall.Signal) {
		signalGroup(pid, sig)
		// A failed write means the supervisor is gone, and the command's
		// processes with it (see below).
		_, _ = fmt.Fprintf(lifeW, "%s %d\n", orderSignal, int(sig))
	}
	j.alive = func() bool { return groupAlive(pid) || descendantsAlive(supervisor) }
	waited := false
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		line, err := report.ReadString('\n')
		if c, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "exited "); ok && err == nil {
			if code, err := strconv.Atoi(c); err == nil {
				j.code = code
				close(j.exited)
				_, _ = io.Copy(io.Discard, report) // until the supervisor exits
				return
			}
		}
		// The supervisor died before the command did: the command got
		// SIGKILL with it (parent-death signal); so does the rest of its
		// group, which nothing would stop any more.
		werr := cmd.Wait()
		waited = true
		signalGroup(pid, syscall.SIGKILL)
		j.code = exitStatus(cmd.ProcessState)
		j.err = fmt.Errorf("the command's supervisor ended unexpectedly (%s); the command's process group was killed", describeExit(werr, ""))
		close(j.exited)
	}()
	j.finish = func(kill bool) {
		order := orderRelease
		if kill {
			order = orderKill
		}
		_, _ = fmt.Fprintln(lifeW, order)
		lifeW.Close()
		<-reported
		reportR.Close()
		if !waited {
			_ = cmd.Wait()
		}
	}
	return j, 0, nil
}

// describeExit says how the supervisor ended, for an error message.
func describeExit(waitErr error, report string) string {
	s := "no report"
	if waitErr != nil {
		s = waitErr.Error()
	}
	if report = strings.TrimSpace(report); report != "" {
		s += ", reported " + strconv.Quote(report)
	}
	return s
}

// selfExecutable is the path that runs this very program, even if its file
// was replaced or removed since it started.
func selfExecutable() string {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self
	}
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return os.Args[0]
}

// supervisorMain is the supervisor: args are "foreground" or "background"
// (whether the command gets the terminal), "--" and the command line.
func supervisorMain(args []string) int {
	if len(args) < 3 || (args[0] != "foreground" && args[0] != "background") || args[1] != "--" || !isPipe(3) || !isPipe(4) {
		fmt.Fprintf(os.Stderr, "turnstile: %s is started by \"turnstile run\" itself, not typed; see \"turnstile help run\"\n", supervisorArg)
		return exitUsage
	}
	// The command inherits neither pipe: it could not hold turnstile's
	// death back anyway (only turnstile holds the write end of life), but
	// it has no business with them.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	life, report := os.NewFile(3, "life"), os.NewFile(4, "report")
	// Processes whose parent dies are re-parented to the supervisor instead
	// of PID 1, so that none can slip out of reach by double-forking or
	// setsid.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(report, "failed %d cannot supervise the command: %v\n", exitCannotRun, err)
		return exitCannotRun
	}
	// Signals are turnstile's to pass on; terminal stop signals must not
	// stop the supervisor. Caught rather than ignored, so that the command
	// starts with them at their defaults; one already ignored stays
	// ignored, for the command too.
	caught := make(chan os.Signal, 1)
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU} {
		if !signal.Ignored(s) {
			signal.Notify(caught, s)
		}
	}
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)

	// The command's parent-death signal is tied to this thread.
	runtime.LockOSThread()
	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = groupAttr(syscall.Stdin, args[0] == "foreground")
	if err := cmd.Start(); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintf(report, "failed %d %s\n", startFailureCode(err), msg)
		return startFailureCode(err)
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(report, "started %d\n", pid)

	orders := make(chan string)
	go readOrders(life, orders)
	exited := false
	for {
		select {
		case <-children:
			if ws, ok := reap(pid); ok && !exited {
				exited = true
				fmt.Fprintf(report, "exited %d\n", waitStatusCode(ws))
			}
		case order := <-orders:
			verb, arg, _ := strings.Cut(order, " ")
			n, err := strconv.Atoi(arg)
			switch {
			case order == orderRelease:
				return 0
			case verb == orderSignal && err == nil && n > 0:
				signalEscaped(pid, syscall.Signal(n))
			default: // orderKill, or turnstile died
				killTree(pid)
				return 0
			}
		}
	}
}

// readOrders sends turnstile's orders from the life pipe on orders, and
// "" once the pipe is closed: turnstile died, unless it sent "release" or
// "kill" before.
func readOrders(life io.Reader, orders chan<- string) {
	r := bufio.NewReader(life)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			orders <- ""
			return
		}
		order := strings.TrimSuffix(line, "\n")
		orders <- order
		if order == orderRelease || order == orderKill {
			return
		}
	}
}

// isPipe reports whether descriptor fd is open on a pipe.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// reap collects every child that has ended, and returns the wait status of
// pid if it was one of them.
func reap(pid int) (status syscall.WaitStatus, found bool) {
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || p <= 0 {
			return status, found
		}
		if p == pid {
			status, found = ws, true
		}
	}
}

// waitStatusCode is the status as a shell reports it: the exit code, or
// 128+N if signal N killed the process.
func waitStatusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// killTree SIGKILLs the process group pgid and every living descendant of
// the supervisor, again and again until none is left: a process may fork
// between the scan and the kill, and its child is then re-parented to the
// supervisor and found by the next scan. SIGKILL ends stopped processes
// too.
func killTree(pgid int) {
	self := os.Getpid()
	for range 1000 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		procs, err := listProcs()
		if err != nil {
			return // nothing more to find without /proc
		}
		var victims []int
		for _, p := range descendants(procs, self) {
			if p.running {
				victims = append(victims, p.pid)
			}
		}
		alive := false
		for _, p := range procs {
			if p.running && p.pgrp == pgid {
				alive = true
			}
		}
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		reap(0)
		if !alive && len(victims) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// signalEscaped sends sig to every living descendant of the supervisor
// outside the process group pgid: the processes of the command that left
// its group, which a signal to the group does not reach.
func signalEscaped(pgid int, sig syscall.Signal) {
	procs, err := listProcs()
	if err != nil {
		return
	}
	for _, p := range descendants(procs, os.Getpid()) {
		if p.running && p.pgrp != pgid {
			_ = syscall.Kill(p.pid, sig)
		}
	}
}
