//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// exitAllowance is what the bounds below allow on top of turnstile's
// own timers for a loaded machine: descheduling, a -race binary's exit.
const exitAllowance = 2 * time.Second

// pauseStore stops srv with SIGSTOP, as a frozen machine would: it keeps
// its connections and answers nothing. It is continued when the test
// ends.
func pauseStore(t *testing.T, srv *testserver.Redis) time.Time {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	return time.Now()
}

// After a lost lease there is nothing to release: turnstile exits 79
// once the command is gone and its connections are closed (closeTimeout
// at most), instead of waiting on a store that does not answer. It used
// to wait out a 5 s release and a 2 s close.
func TestRunLeaseLostOnSilentStoreExitsPromptly(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	const ttl = 600 * time.Millisecond
	p := startTurnstile(t, env, "run", "--key", "lock:test:silent-lost", "--ttl", ttl.String(), "--grace", "5s", "--",
		"sh", "-c", `trap 'exit 3' TERM; touch "$DIR/ready"; sleep 300 & wait`)
	waitForFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	paused := pauseStore(t, srv)

	r := p.wait(t, 30*time.Second)
	took := time.Since(paused)
	if r.code != exitLeaseLost {
		t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	}
	// The lease is lost at its local deadline, at most a TTL after the
	// last renewal; the command exits on SIGTERM at once.
	// docs/cli.md states at most 1 s after the command is gone.
	if closeTimeout > time.Second {
		t.Errorf("close %v exceeds the 1 s docs/cli.md states", closeTimeout)
	}
	if limit := ttl + closeTimeout + exitAllowance; took > limit {
		t.Errorf("turnstile exited %v after the store stopped answering, want within %v (TTL %v, close %v, allowance %v); stderr:\n%s",
			took.Round(time.Millisecond), limit, ttl, closeTimeout, exitAllowance, r.stderr)
	}
}

// When the command ends while the store does not answer, the release is
// given releaseTimeout and closing closeTimeout: turnstile exits with the
// command's status and a warning that the lock expires by itself.
func TestRunReleaseOnSilentStoreIsBounded(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	p := startTurnstile(t, env, "run", "--key", "lock:test:silent-release", "--ttl", "30s", "--",
		"sh", "-c", `touch "$DIR/ready"; while [ ! -e "$DIR/go" ]; do sleep 0.01; done; exit 4`)
	waitForFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	pauseStore(t, srv)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()

	r := p.wait(t, 30*time.Second)
	took := time.Since(ended)
	if r.code != 4 {
		t.Errorf("exit code %d, want the command's 4; stderr:\n%s", r.code, r.stderr)
	}
	// docs/cli.md states this worst case: 3 s after the command ends.
	if releaseTimeout+closeTimeout > 3*time.Second {
		t.Errorf("release %v and close %v exceed the 3 s docs/cli.md states", releaseTimeout, closeTimeout)
	}
	if limit := releaseTimeout + closeTimeout + exitAllowance; took > limit {
		t.Errorf("turnstile exited %v after the command ended, want within %v (release %v, close %v, allowance %v); stderr:\n%s",
			took.Round(time.Millisecond), limit, releaseTimeout, closeTimeout, exitAllowance, r.stderr)
	}
}
