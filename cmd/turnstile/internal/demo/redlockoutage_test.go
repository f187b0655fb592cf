//go:build linux

package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/memory"
)

// The outage shortened for the tests, to a few seconds a run: its lease
// TTL, of which its grace and timeouts are multiples (the Redlock's node
// timeout is a tenth of it, the default 50 ms), and the least time of its
// steady phases.
const (
	outageTestTTL   = "500ms"
	outageTestPhase = "300ms"
)

// checkOutageRuns checks the verdicts of one run of redlock-outage: every
// phase reached, the Redlock granting before the outage and after it,
// secondary between, acquisitions failing while the quorum is lost, and
// the token and fence checks passed.
func checkOutageRuns(t *testing.T, runs []demoRun, secondary string) {
	t.Helper()
	checkTurnstileRuns(t, runs)
	want := append(outagePhaseNames[:], "tokens", "fence")
	n := 0
	for _, r := range runs {
		if r["scenario"] == "redlock-outage" {
			n++
		}
	}
	if n != len(want) {
		t.Errorf("%d runs of redlock-outage, want %d (%v)", n, len(want), want)
	}
	for _, v := range outagePhaseNames {
		if r := find(t, runs, "redlock-outage", v); r["reached"] != true || r["secondary"] != secondary {
			t.Errorf("phase %s: %v", v, r)
		}
	}
	for _, v := range []string{"normal", "recovered"} {
		if r := find(t, runs, "redlock-outage", v); number(t, r, "by_redlock") == 0 {
			t.Errorf("phase %s: the Redlock granted nothing: %v", v, r)
		}
	}
	if r := find(t, runs, "redlock-outage", "fallback"); number(t, r, "by_secondary") == 0 || number(t, r, "by_redlock") != 0 {
		t.Errorf("phase fallback: want grants by %s only: %v", secondary, r)
	}
	// Failing fast: every breaker opens as soon as three nodes refuse the
	// connection, not after a node timeout or a TTL, and an acquisition
	// that fails meanwhile fails as fast. Whether any does depends on
	// the schedule: a lease's failed release, and the clean-up releases
	// of failed attempts, count towards a breaker too, and the call that
	// opens it answers "not acquired". The bound is the TTL, generous on
	// a busy machine.
	lost := find(t, runs, "redlock-outage", "quorum-lost")
	if open := number(t, lost, "breakers_open_ms"); open <= 0 || open >= number(t, lost, "ttl_ms") {
		t.Errorf("phase quorum-lost: want every breaker open within a TTL of the kill: %v", lost)
	}
	if number(t, lost, "failed") > 0 && number(t, lost, "fail_p50_ms") >= number(t, lost, "ttl_ms") {
		t.Errorf("phase quorum-lost: want acquisitions failing in under a TTL: %v", lost)
	}
	tokens := find(t, runs, "redlock-outage", "tokens")
	if number(t, tokens, "not_increasing") != 0 || number(t, tokens, "by_redlock") == 0 || number(t, tokens, "by_secondary") == 0 {
		t.Errorf("tokens: want critical sections on both stores, every token above the last: %v", tokens)
	}
	fenced := find(t, runs, "redlock-outage", "fence")
	if number(t, fenced, "current_refused") != 0 || number(t, fenced, "writes_accepted") == 0 {
		t.Errorf("fence: %v", fenced)
	}
}

func TestRedlockOutageInProcess(t *testing.T) {
	r := runDemo(t, "redlock-outage", "--json", "--in-process", "--outage-ttl", outageTestTTL, "--outage-phase", outageTestPhase)
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"in-process Redis nodes (miniredis)", "no restart quarantine",
		"secondary is the demo's Redis", "phase quorum-lost: SIGKILL 3 of the 5 nodes",
		"breaker open after 5 consecutive failures", "phase recovered",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr has no %q:\n%s", want, r.stderr)
		}
	}
	checkOutageRuns(t, parseDemoJSON(t, r.stdout), "redis")
}

// The run on real servers — five redis-servers, SIGKILLed and restarted,
// and PostgreSQL as the secondary — is part of TestDemoJSONAllScenarios,
// which checks it with checkOutageRuns and checkOutageRealServers.

// checkOutageRealServers checks what the real-server run says it did.
func checkOutageRealServers(t *testing.T, stderr string) {
	t.Helper()
	for _, want := range []string{"5 redis-server nodes on", "restart quarantine " + outageTestTTL, "killed 3 of the 5 nodes", "restarted the 3 nodes"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr)
		}
	}
}

// A secondary whose tokens do not continue the Redlock's — the memory
// backend counts from 1 — hands out tokens below the last one: the
// checks must fail, and say so.
func TestRedlockOutageStaleTokensFail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), runBound)
	defer cancel()
	var stderr lockedBuffer
	env, err := startEnv(ctx, &options{inProcess: true}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ttl, _ := time.ParseDuration(outageTestTTL)
	steady, _ := time.ParseDuration(outageTestPhase)
	rs, err := runOutage(ctx, env, outageConfig{ttl: ttl, steady: steady, secondary: memory.New(), secondaryName: "memory"})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	verdicts := map[string]result{}
	for _, r := range rs {
		verdicts[r.Variant] = r
	}
	for _, v := range outagePhaseNames {
		if !verdicts[v].OK {
			t.Errorf("phase %s not ok: %s", v, verdicts[v].Summary)
		}
	}
	if tok := verdicts["tokens"]; tok.OK || !strings.Contains(tok.Summary, "not above the key's last") || !strings.Contains(tok.Summary, "from memory") {
		t.Errorf("tokens check passed with the memory secondary's tokens: ok %v, %s", tok.OK, tok.Summary)
	}
	if f := verdicts["fence"]; f.OK || !strings.Contains(f.Summary, "refused") || !strings.Contains(f.Summary, "writes of current holders") {
		t.Errorf("fence check passed with the memory secondary's tokens: ok %v, %s", f.OK, f.Summary)
	}
}
