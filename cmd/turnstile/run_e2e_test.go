//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// These tests run the built binary against a real redis-server.

func TestRunExcludesConcurrentHolders(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	logPath := filepath.Join(t.TempDir(), "log")
	env := []string{"TURNSTILE_BACKEND=" + srv.URL(), "LOG=" + logPath}
	script := `echo "start $TURNSTILE_TOKEN" >> "$LOG"; sleep 0.3; echo "end $TURNSTILE_TOKEN" >> "$LOG"`

	const holders = 3
	procs := make([]*proc, holders)
	for i := range procs {
		procs[i] = startTurnstile(t, env, "run", "--key", "lock:test:exclusive", "--wait", "30s", "--", "sh", "-c", script)
	}
	for i, p := range procs {
		if r := p.wait(t, 60*time.Second); r.code != 0 {
			t.Errorf("holder %d: exit code %d, want 0; stderr:\n%s", i, r.code, r.stderr)
		}
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*holders {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), 2*holders, b)
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		start, okStart := strings.CutPrefix(lines[i], "start ")
		end, okEnd := strings.CutPrefix(lines[i+1], "end ")
		if !okStart || !okEnd || start != end {
			t.Fatalf("holders overlapped: lines %d-%d are %q, %q, want start/end of one token:\n%s", i+1, i+2, lines[i], lines[i+1], b)
		}
		token, err := strconv.ParseUint(start, 10, 64)
		if err != nil {
			t.Fatalf("token %q: %v", start, err)
		}
		if token <= last {
			t.Errorf("token %d of holder %d is not greater than the earlier holder's %d", token, i/2+1, last)
		}
		last = token
	}
}

func TestRunWhileHeldElsewhere(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	const key = "lock:test:busy"
	ran := filepath.Join(dir, "ran")

	holder := startTurnstile(t, env, "run", "--key", key, "--",
		"sh", "-c", `trap 'echo term > "$DIR/term"; exit 3' TERM; sleep 30 & touch "$DIR/ready"; wait`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)

	t.Run("no-wait fails at once", func(t *testing.T) {
		r := runTurnstile(t, env, "run", "--key", key, "--no-wait", "--", "touch", ran)
		if r.code != exitNotAcquired {
			t.Errorf("exit code %d, want %d (not acquired); stderr:\n%s", r.code, exitNotAcquired, r.stderr)
		}
		if !strings.Contains(r.stderr, "held by another owner") {
			t.Errorf("stderr does not say why:\n%s", r.stderr)
		}
	})
	t.Run("wait expires", func(t *testing.T) {
		r := runTurnstile(t, env, "run", "--key", key, "--wait", "300ms", "--", "touch", ran)
		if r.code != exitNotAcquired {
			t.Errorf("exit code %d, want %d (not acquired); stderr:\n%s", r.code, exitNotAcquired, r.stderr)
		}
		if r.elapsed < 300*time.Millisecond {
			t.Errorf("gave up after %v, before --wait 300ms", r.elapsed)
		}
		if !strings.Contains(r.stderr, "not acquired within --wait 300ms") {
			t.Errorf("stderr does not say why:\n%s", r.stderr)
		}
	})
	t.Run("interrupted while waiting", func(t *testing.T) {
		before := clientCount(t, srv)
		waiter := startTurnstile(t, env, "run", "--key", key, "--", "touch", ran)
		// Signal it once it has connected, so its handlers are installed
		// whatever the machine's load: a fixed sleep may end while a busy
		// machine is still starting the process.
		awaitClients(t, srv, before+1, 20*time.Second)
		if err := waiter.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := waiter.wait(t, 10*time.Second)
		if r.code != 128+int(syscall.SIGINT) {
			t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, 128+int(syscall.SIGINT), r.stderr)
		}
		if !strings.Contains(r.stderr, "received SIGINT while waiting") {
			t.Errorf("stderr does not say why:\n%s", r.stderr)
		}
	})
	if exists(ran) {
		t.Fatal("a command ran while another turnstile held the lock")
	}

	// SIGTERM to the holder reaches its command, whose status comes back,
	// and the lock is free again at once rather than after its TTL.
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(t, 10*time.Second); r.code != 3 {
		t.Errorf("holder: exit code %d, want the command's 3; stderr:\n%s", r.code, r.stderr)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("SIGTERM was not passed on to the command")
	}
	if r := runTurnstile(t, env, "run", "--key", key, "--no-wait", "--", "touch", ran); r.code != 0 {
		t.Errorf("after the holder exited: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	if !exists(ran) {
		t.Error("the command did not run once the lock was released")
	}
}

func TestRunPassesExitStatusAndEnvironment(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	env := []string{"TURNSTILE_BACKEND=" + srv.URL()}
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"exit 0", []string{"true"}, 0},
		{"exit 7", []string{"sh", "-c", "exit 7"}, 7},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"not found", []string{"turnstile-no-such-command"}, exitNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runTurnstile(t, env, append([]string{"run", "--key", "lock:test:status", "--"}, tt.argv...)...)
			if r.code != tt.want {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tt.want, r.stderr)
			}
		})
	}

	r := runTurnstile(t, env, "run", "--key", "lock:test:env", "--", "sh", "-c", `echo "$TURNSTILE_KEY $TURNSTILE_TOKEN"`)
	key, token, _ := strings.Cut(strings.TrimSpace(r.stdout), " ")
	if r.code != 0 || key != "lock:test:env" {
		t.Fatalf("exit code %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n, err := strconv.ParseUint(token, 10, 64); err != nil || n == 0 {
		t.Errorf("TURNSTILE_TOKEN = %q, want a positive decimal", token)
	}
}

func TestRunBackendErrors(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	url := srv.URL()
	srv.Kill()

	r := runTurnstile(t, nil, "run", "--backend", url, "--key", "k", "--", "true")
	if r.code != exitUnavailable {
		t.Errorf("unreachable store: exit code %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	if !strings.Contains(r.stderr, srv.Addr()) {
		t.Errorf("stderr does not name the store:\n%s", r.stderr)
	}

	withPassword := strings.Replace(url, "redis://", "redis://user:s3cret@", 1)
	r = runTurnstile(t, nil, "run", "--backend", withPassword, "--key", "k", "--", "true")
	if r.code != exitUnavailable || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("unreachable store with a password: exit code %d, want %d, and no password in stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}

	r = runTurnstile(t, nil, "run", "--backend", "foo://x", "--key", "k", "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, `unknown backend scheme: "foo"`) {
		t.Errorf("unknown scheme: exit code %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
	}
	r = runTurnstile(t, nil, "run", "--key", "k", "--ttl", "abc", "--", "true")
	if r.code != exitUsage || strings.Contains(r.stderr, "panic") {
		t.Errorf("bad ttl: exit code %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
	}
}

// leaderScript records the term and value, says it leads, and leads
// until told to stop.
const leaderScript = `echo "$TURNSTILE_TERM $TURNSTILE_VALUE" >> "$DIR/log"
touch "$DIR/$TURNSTILE_VALUE-leads"
while [ ! -e "$DIR/$TURNSTILE_VALUE-go" ]; do sleep 0.05; done`

// TestRunLeaderHandsOver runs the built binary against redis-server: one
// of two candidates leads, --no-wait and --wait candidates are refused
// naming the leader, and when the leader's command exits the other is elected at
// once — not after the TTL — with a greater term.
func TestRunLeaderHandsOver(t *testing.T) {
	t.Parallel()
	_, dir, env := redisDir(t)
	const name = "leader:test:handover"

	a := startTurnstile(t, env, "run", "--leader", name, "--value", "a", "--", "sh", "-c", leaderScript)
	waitForFile(t, filepath.Join(dir, "a-leads"), 30*time.Second)
	b := startTurnstile(t, env, "run", "--leader", name, "--value", "b", "--", "sh", "-c", leaderScript)

	r := runTurnstile(t, env, "run", "--leader", name, "--no-wait", "--value", "c", "--", "touch", filepath.Join(dir, "c-leads"))
	if r.code != exitNotAcquired {
		t.Errorf("--no-wait candidate: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	if !strings.Contains(r.stderr, `"leader:test:handover" has a leader already (--no-wait): "a" leads in term`) {
		t.Errorf("--no-wait candidate's stderr does not name the leader:\n%s", r.stderr)
	}
	r = runTurnstile(t, env, "run", "--leader", name, "--wait", "300ms", "--value", "c", "--", "touch", filepath.Join(dir, "c-leads"))
	if r.code != exitNotAcquired || !strings.Contains(r.stderr, `not elected leader of "leader:test:handover" within --wait 300ms: "a" leads in term`) {
		t.Errorf("--wait candidate: exit code %d, want %d, naming the leader; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	if exists(filepath.Join(dir, "b-leads")) || exists(filepath.Join(dir, "c-leads")) {
		t.Fatal("a second candidate leads while the first does")
	}

	// The default TTL is 30 s: a handover within half of it came from
	// the leader's release, not from its lock expiring.
	if err := os.WriteFile(filepath.Join(dir, "a-go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := a.wait(t, 30*time.Second); r.code != 0 {
		t.Errorf("leader a: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	handover := time.Now()
	waitForFile(t, filepath.Join(dir, "b-leads"), 15*time.Second)
	if took := time.Since(handover); took > 15*time.Second {
		t.Errorf("b was elected %v after a exited", took)
	}
	if err := os.WriteFile(filepath.Join(dir, "b-go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := b.wait(t, 30*time.Second); r.code != 0 {
		t.Errorf("leader b: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}

	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s\nwant two leaders", log)
	}
	var terms [2]uint64
	for i, want := range []string{"a", "b"} {
		term, value, _ := strings.Cut(lines[i], " ")
		if terms[i], err = strconv.ParseUint(term, 10, 64); err != nil || value != want {
			t.Fatalf("log line %d = %q, want a term and %q", i+1, lines[i], want)
		}
	}
	if terms[1] <= terms[0] {
		t.Errorf("b's term %d is not greater than a's %d", terms[1], terms[0])
	}
}

// TestRunLeaderLostExits79: a leader whose lock is removed behind its
// back is stopped and turnstile exits 79, as for a lost lock.
func TestRunLeaderLostExits79(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	const name = "leader:test:lost"

	p := startTurnstile(t, env, "run", "--leader", name, "--value", "a", "--ttl", "600ms", "--grace", "5s", "--",
		"sh", "-c", `trap 'echo term > "$DIR/term"; exit 0' TERM
touch "$DIR/a-leads"
sleep 30 & wait`)
	waitForFile(t, filepath.Join(dir, "a-leads"), 30*time.Second)
	// The redis backend stores the lock of K under "{K}".
	if n, err := srv.Do("DEL", "{"+name+"}"); err != nil || n != "1" {
		t.Fatalf("DEL {%s} = %q, %v; want 1", name, n, err)
	}
	r := p.wait(t, 20*time.Second)
	if r.code != exitLeaseLost {
		t.Errorf("exit code %d, want %d (leadership lost) though the command exited 0; stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the command did not get SIGTERM")
	}
	if !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr does not say leadership was lost:\n%s", r.stderr)
	}
}

// clientCount is the number of clients connected to srv.
func clientCount(t *testing.T, srv *testserver.Redis) int {
	t.Helper()
	list, err := srv.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "id=") - 1 // not the connection asking
}

// awaitClients waits until at least n clients are connected to srv.
func awaitClients(t *testing.T, srv *testserver.Redis, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); clientCount(t, srv) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d clients connected after %v", n, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
