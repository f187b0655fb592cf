//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
