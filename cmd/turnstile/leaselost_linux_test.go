package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// deleteLock removes the Redis lock key of key behind its holder's back,
// as an operator, an eviction or a failover would.
func deleteLock(t *testing.T, srv *testserver.Redis, key string) time.Time {
	t.Helper()
	// The redis backend stores the lock of K under "{K}" (its hash tag).
	n, err := srv.Do("DEL", "{"+key+"}")
	if err != nil || n != "1" {
		t.Fatalf("DEL {%s} = %q, %v; want 1 (the lock key)", key, n, err)
	}
	return time.Now()
}

func TestRunStopsCommandWhenLeaseLost(t *testing.T) {
	t.Parallel()
	l := runThenDeleteLock(t, "lock:test:lost", 5*time.Second, `'echo term > "$DIR/term"; exit 0'`)
	r := l.p.wait(t, 10*time.Second)
	if r.code != exitLeaseLost {
		t.Errorf("exit code %d, want %d (lease lost) even though the command exited 0; stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	}
	if took := time.Since(l.deleted); took > 3*time.Second {
		t.Errorf("turnstile exited %v after the lock was deleted, want within a few renewals", took)
	}
	if !exists(filepath.Join(l.dir, "term")) {
		t.Error("the command did not get SIGTERM")
	}
	if !processGone(l.grandchild) {
		t.Errorf("grandchild %d still runs: the process group was not stopped", l.grandchild)
	}
	if !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr does not say the lease was lost:\n%s", r.stderr)
	}
}

func TestRunKillsCommandIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	const grace = 500 * time.Millisecond
	l := runThenDeleteLock(t, "lock:test:stubborn", grace, `''`)
	r := l.p.wait(t, 10*time.Second)
	took, grandchild := time.Since(l.deleted), l.grandchild
	if r.code != exitLeaseLost {
		t.Errorf("exit code %d, want %d (lease lost); stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	}
	if took < grace || took > 3*time.Second+grace {
		t.Errorf("turnstile exited %v after the lock was deleted, want --grace %v after it noticed", took, grace)
	}
	if !processGone(grandchild) {
		t.Errorf("grandchild %d survived SIGKILL of its process group", grandchild)
	}
}

// lostRun is a turnstile run whose lock runThenDeleteLock deleted.
type lostRun struct {
	p          *proc
	dir        string    // $DIR of the command
	grandchild int       // the PID of the command's background process
	deleted    time.Time // when the lock was deleted
}

// runThenDeleteLock starts "turnstile run" on key with a 600ms TTL and
// grace against a redis-server of its own. The command is a shell that
// sets trap as its SIGTERM handler and waits for a background process it
// starts; once the command runs, the lock is deleted behind its back.
func runThenDeleteLock(t *testing.T, key string, grace time.Duration, trap string) lostRun {
	t.Helper()
	srv, dir, env := redisDir(t)
	p := startTurnstile(t, env, "run", "--key", key, "--ttl", "600ms", "--grace", grace.String(), "--",
		"sh", "-c", `trap `+trap+` TERM
sleep 30 & echo $! > "$DIR/grandchild"
touch "$DIR/ready"
wait`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	grandchild := readPID(t, filepath.Join(dir, "grandchild"))
	return lostRun{p: p, dir: dir, grandchild: grandchild, deleted: deleteLock(t, srv, key)}
}

// readPID reads the process id a test command wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// processGone reports whether pid has ended. A zombie counts as ended:
// where PID 1 does not reap orphans, it stays a zombie for good.
func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	running, _ := parseStat(stat)
	return !running
}

// With the store gone, no renewal is confirmed: the lease must be given up
// by its local deadline, before the store could have let another holder in.
func TestRunStopsCommandWhenStoreDies(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	const ttl = 600 * time.Millisecond

	p := startTurnstile(t, env, "run", "--key", "lock:test:store-dies", "--ttl", ttl.String(), "--grace", "5s", "--",
		"sh", "-c", `trap 'echo term > "$DIR/term"; exit 0' TERM; sleep 30 & touch "$DIR/ready"; wait`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	srv.Kill()
	killed := time.Now()

	r := p.wait(t, 15*time.Second)
	if r.code != exitLeaseLost {
		t.Errorf("exit code %d, want %d (lease lost); stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the command did not get SIGTERM")
	}
	// The lease ends at its local deadline, at most one TTL after the last
	// renewal; releasing on a dead store is bounded too.
	if took := time.Since(killed); took > ttl+releaseTimeout+2*time.Second {
		t.Errorf("turnstile exited %v after the store died", took)
	}
}
