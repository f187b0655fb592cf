//go:build unix

package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// sectionScript is a critical section that notices another holder: it
// makes $DIR/in, which fails while another section holds it, and appends
// its fencing token to $DIR/tokens.
const sectionScript = `mkdir "$DIR/in" 2>/dev/null || touch "$DIR/overlap"; echo "$TURNSTILE_TOKEN" >> "$DIR/tokens"; sleep 0.1; rmdir "$DIR/in"`

// stayScript is sectionScript held until turnstile stops it (SIGTERM, on
// a lost lease); it says it holds the key in $DIR/staying.
const stayScript = `mkdir "$DIR/in" 2>/dev/null || touch "$DIR/overlap"; echo "$TURNSTILE_TOKEN" >> "$DIR/tokens"; trap 'rmdir "$DIR/in"; exit 0' TERM; touch "$DIR/staying"; while :; do sleep 0.05; done`

// TestRunFallbackOutage: every "turnstile run" is a fresh process with a
// breaker of its own. With the Redis primary killed, the first run opens
// the pair, moves it to PostgreSQL and is granted the lock after the
// grace; every later run learns from PostgreSQL that the pair has
// switched and gets the lock at once (--wait 5s is enough), and runs
// exclude one another. With Redis back, a run's probe moves the pair
// back: a run holding the lock in PostgreSQL loses it (exit 79) before
// Redis grants it to anyone, and runs lock in Redis again. No two runs
// are ever in their critical sections at once, and tokens increase in
// the order they ran.
func TestRunFallbackOutage(t *testing.T) {
	const grace = 10 * time.Second
	rs := testserver.StartRedis(t)
	pg := testserver.StartPostgres(t)
	dir := t.TempDir()
	env := []string{
		"TURNSTILE_BACKEND=fallback://?primary=" + url.QueryEscape(rs.URL()) + "&secondary=" + url.QueryEscape(pg.URL()) +
			"&grace=" + grace.String() + "&open_timeout=1s",
		"DIR=" + dir,
	}
	const key = "lock:cli:fallback"
	run := func(wait string, script string) result {
		return runTurnstile(t, env, "run", "--key", key, "--ttl", "2s", "--wait", wait, "--", "sh", "-c", script)
	}
	if r := run("5s", sectionScript); r.code != 0 {
		t.Fatalf("a run with both stores up: exit code %d; stderr:\n%s", r.code, r.stderr)
	}

	rs.Kill()
	killed := time.Now()
	// The first run after the kill: it cannot reach the primary, which it
	// never reached, so it moves the pair and waits out the grace.
	if r := run("60s", sectionScript); r.code != 0 || time.Since(killed) < grace*49/50 {
		t.Fatalf("the first run after the kill: exit code %d after %v (grace %v); stderr:\n%s", r.code, time.Since(killed), grace, r.stderr)
	}
	t.Logf("the first run after the kill moved the pair and ran %v after the kill", time.Since(killed).Round(time.Millisecond))
	// Later runs are served by PostgreSQL at once.
	for i := range 3 {
		r := run("5s", sectionScript)
		if r.code != 0 {
			t.Fatalf("run %d while PostgreSQL serves: exit code %d after %v, want 0 within --wait 5s; stderr:\n%s", i, r.code, r.elapsed, r.stderr)
		}
		t.Logf("run %d while PostgreSQL serves: done in %v", i, r.elapsed.Round(time.Millisecond))
	}
	// Runs exclude one another: one holds, a --no-wait run is refused.
	holder := startTurnstile(t, env, "run", "--key", key, "--ttl", "2s", "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)
	if r := runTurnstile(t, env, "run", "--key", key, "--ttl", "2s", "--no-wait", "--", "true"); r.code != exitNotAcquired {
		t.Fatalf("a run while another holds the lock in PostgreSQL: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(t, time.Minute); r.code != 0 {
		t.Fatalf("holder: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	contend(t, 4, func() result { return run("60s", sectionScript) })

	// A run holds the lock in PostgreSQL when Redis comes back; runs
	// contend for it until Redis has served a while.
	stay := startTurnstile(t, env, "run", "--key", key, "--ttl", "2s", "--", "sh", "-c", stayScript)
	waitForFile(t, filepath.Join(dir, "staying"), time.Minute)
	rs.Restart()
	restarted := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for time.Since(restarted) < grace+10*time.Second {
				if r := run("60s", sectionScript); r.code != 0 {
					t.Errorf("a run after Redis came back: exit code %d; stderr:\n%s", r.code, r.stderr)
					return
				}
			}
		})
	}
	if r := stay.wait(t, 2*grace+time.Minute); r.code != exitLeaseLost {
		t.Errorf("the run holding the lock in PostgreSQL across the switch back: exit code %d, want %d; stderr:\n%s", r.code, exitLeaseLost, r.stderr)
	} else {
		t.Logf("the run holding the lock in PostgreSQL lost it %v after Redis came back", time.Since(restarted).Round(time.Millisecond))
	}
	wg.Wait()

	// Redis serves again: a holder's lock is in Redis.
	if err := os.Remove(filepath.Join(dir, "held")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "go")); err != nil {
		t.Fatal(err)
	}
	holder = startTurnstile(t, env, "run", "--key", key, "--ttl", "2s", "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)
	if n, err := rs.Do("EXISTS", "{"+key+"}"); err != nil || n != "1" {
		t.Errorf("Redis does not hold the lock after the switch back: EXISTS = %q, %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder.wait(t, time.Minute)
	checkSections(t, dir)
}

// contend runs n runs at once and fails the test if one fails.
func contend(t *testing.T, n int, run func() result) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if r := run(); r.code != 0 {
				t.Errorf("one of %d runs at once: exit code %d; stderr:\n%s", n, r.code, r.stderr)
			}
		})
	}
	wg.Wait()
}

// checkSections fails the test if two critical sections overlapped or a
// token was not above the one before it.
func checkSections(t *testing.T, dir string) {
	t.Helper()
	if exists(filepath.Join(dir, "overlap")) {
		t.Error("two runs were in their critical sections at once")
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	var last uint64
	for i, l := range lines {
		tok, err := strconv.ParseUint(l, 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("critical section %d ran with token %q, not above %d", i, l, last)
		}
		last = tok
	}
	t.Logf("%d critical sections, one at a time, tokens increasing", len(lines))
}
