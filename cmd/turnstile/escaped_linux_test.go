package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// escapingScript is a command that starts a daemon of its own: a process
// that leaves the command's process group and session (setsid), ignores
// SIGTERM and writes a heartbeat to $DIR/heartbeat until it is killed.
// It writes the daemon's PID to $DIR/escaped, then waits, exiting 3 on
// SIGTERM.
const escapingScript = `setsid sh -c 'trap "" TERM; echo $$ > "$DIR/escaped"; while :; do date +%s%N > "$DIR/heartbeat"; sleep 0.05; done' &
while [ ! -s "$DIR/escaped" ]; do sleep 0.01; done
trap 'exit 3' TERM
touch "$DIR/ready"
sleep 300 & wait`

// startEscaping waits until the command of escapingScript runs in dir
// and returns its daemon's PID; the daemon is killed when the test ends
// whatever happens.
func startEscaping(t *testing.T, dir string) int {
	t.Helper()
	waitForFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	pid := readPID(t, filepath.Join(dir, "escaped"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if processGone(pid) {
		t.Fatalf("the daemon %d is not running before the command is stopped", pid)
	}
	return pid
}

// assertDaemonGone checks that the daemon the command started is gone by
// the time turnstile has exited, and writes no heartbeat any more.
func assertDaemonGone(t *testing.T, dir string, pid int) {
	t.Helper()
	if !processGone(pid) {
		t.Fatalf("the command's daemon %d (setsid) still runs after turnstile exited", pid)
	}
	hb := filepath.Join(dir, "heartbeat")
	before, _ := os.ReadFile(hb)
	time.Sleep(200 * time.Millisecond)
	if after, _ := os.ReadFile(hb); string(after) != string(before) {
		t.Fatalf("the heartbeat file still changes after turnstile exited")
	}
}

// On a lost lease, a process that left the command's group is stopped
// with the group: SIGTERM, then SIGKILL after --grace, before turnstile
// exits. It used to run on, re-parented to PID 1, beside the next holder.
func TestRunLeaseLostKillsEscapedDaemon(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	const key, ttl, grace = "lock:test:escaped", 600 * time.Millisecond, time.Second
	p := startTurnstile(t, env, "run", "--key", key, "--ttl", ttl.String(), "--grace", grace.String(), "--", "sh", "-c", escapingScript)
	daemon := startEscaping(t, dir)
	deleted := deleteLock(t, srv, key)

	r := p.wait(t, 20*time.Second)
	took := time.Since(deleted)
	if r.code != exitLeaseLost {
		t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	}
	assertDaemonGone(t, dir, daemon)
	// The loss is noticed at the next renewal (TTL/3), the daemon ignores
	// SIGTERM and gets SIGKILL after the grace period; the rest is room
	// for a loaded machine.
	if limit := ttl + grace + 5*time.Second; took > limit {
		t.Errorf("turnstile exited %v after the lock was deleted, want within %v", took, limit)
	}
}

// A signal to turnstile is passed on to every process of the command,
// and what is left when the command exits gets the grace period, then
// SIGKILL, before the lock is released.
func TestRunSignalKillsEscapedDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const grace = 500 * time.Millisecond
	p := startTurnstile(t, []string{"DIR=" + dir}, "run", "--backend", "mem://", "--key", "k", "--grace", grace.String(), "--", "sh", "-c", escapingScript)
	daemon := startEscaping(t, dir)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()

	r := p.wait(t, 20*time.Second)
	took := time.Since(signalled)
	if r.code != 3 {
		t.Errorf("exit code %d, want the command's 3; stderr:\n%s", r.code, r.stderr)
	}
	assertDaemonGone(t, dir, daemon)
	if limit := grace + 5*time.Second; took > limit {
		t.Errorf("turnstile exited %v after SIGTERM, want within %v", took, limit)
	}
}

// The end of runCmd's context (a deadline of the caller) stops the
// command as a signal does: nothing it started outlives runCmd.
func TestRunInProcessDeadlineKillsEscapedDaemon(t *testing.T) {
	ctx, dir := cancelWhenReady(t)
	code, _, stderr := runInProcess(t, ctx, "--key", "k", "--grace", "300ms", "--", "sh", "-c", escapingScript)
	// The script wrote the daemon's PID before it said it was ready.
	daemon := readPID(t, filepath.Join(dir, "escaped"))
	t.Cleanup(func() { _ = syscall.Kill(daemon, syscall.SIGKILL) })
	if code != 3 {
		t.Errorf("exit code %d, want the command's 3; stderr:\n%s", code, stderr)
	}
	assertDaemonGone(t, dir, daemon)
}
