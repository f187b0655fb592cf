package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// If turnstile is killed outright, nothing renews the lease any more; the
// command must not go on as if it still held the lock.
func TestRunCommandDiesWithTurnstile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startTurnstile(t, []string{"DIR=" + dir}, "run", "--backend", "mem://", "--key", "k", "--",
		"sh", "-c", `echo $$ > "$DIR/pid"; touch "$DIR/ready"; sleep 30`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	child := readPID(t, filepath.Join(dir, "pid"))
	// Should the test fail, leave nothing running.
	t.Cleanup(func() { _ = syscall.Kill(-child, syscall.SIGKILL) })

	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("command %d still runs 5s after turnstile was killed", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
