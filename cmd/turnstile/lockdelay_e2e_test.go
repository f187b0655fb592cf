//go:build unix

package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunLockDelay: a turnstile run with --lock-delay that is SIGKILLed
// leaves the lock to the store for --ttl + --lock-delay after its grant,
// and for --lock-delay at least after its death (its last renewal came
// less than a TTL before it); a run that exits cleanly releases at once.
func TestRunLockDelay(t *testing.T) {
	t.Parallel()
	_, dir, env := redisDir(t)
	const key = "lock:test:lockdelay"
	const ttl, delay = time.Second, 3 * time.Second
	// Redis counts the expiry in whole milliseconds, and its clock and
	// ours may differ in rate by NTP's largest slew (500 ppm).
	margin := 2*time.Millisecond + (ttl+delay)/1000

	// A clean exit releases at once, the delay notwithstanding.
	if r := runTurnstile(t, env, "run", "--key", key, "--ttl", ttl.String(), "--lock-delay", delay.String(), "--", "true"); r.code != 0 {
		t.Fatalf("clean run: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if r := runTurnstile(t, env, "run", "--key", key, "--no-wait", "--", "true"); r.code != 0 {
		t.Fatalf("right after a clean run: exit code %d, want 0 (released at once); stderr:\n%s", r.code, r.stderr)
	}

	holder := startTurnstile(t, env, "run", "--key", key, "--ttl", ttl.String(), "--lock-delay", delay.String(), "--",
		"sh", "-c", `touch "$DIR/ready"; sleep 30`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	holder.wait(t, 10*time.Second)

	r := runTurnstile(t, env, "run", "--key", key, "--wait", "30s", "--", "true")
	if r.code != 0 {
		t.Fatalf("next run: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	// The next run's grant came before it exited: load only makes these
	// waits look longer.
	end := time.Now()
	if waited := end.Sub(holder.started); waited < ttl+delay-margin {
		t.Errorf("the next run had the lock %v after the killed holder started, before --ttl %v + --lock-delay %v", waited, ttl, delay)
	}
	if waited := end.Sub(killed); waited < delay-margin {
		t.Errorf("the next run had the lock %v after the holder was killed, before --lock-delay %v", waited, delay)
	}
}
