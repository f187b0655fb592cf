//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
)

// startLogged starts turnstile with args, its stderr going to the file
// errPath, which the test can read while turnstile runs.
func startLogged(t *testing.T, env []string, errPath string, args ...string) *proc {
	t.Helper()
	env = append(env, "TS="+binary, "ERR="+errPath)
	return startProcess(t, env, "sh", append([]string{"-c", `exec "$TS" "$@" 2>"$ERR"`, "sh"}, args...)...)
}

// waitForText waits until the file at path contains text.
func waitForText(t *testing.T, path, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not say %q within %v; it says:\n%s", filepath.Base(path), text, timeout, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkFairOrder holds KEY with a plain run, lines up three --fair runs
// one after another, and checks that they are served in that order once
// the holder is done, that each waiter was told its place on joining
// (1st, 2nd, 3rd), and that it was told only smaller places after that
// (a store may learn of a move late and skip a place).
func checkFairOrder(t *testing.T, backend string) {
	dir := t.TempDir()
	env := []string{"TURNSTILE_BACKEND=" + backend, "DIR=" + dir}
	const key = "lock:cli:fair"
	holder := startTurnstile(t, env, "run", "--key", key, "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)

	names := []string{"A", "B", "C"}
	places := []string{"1st", "2nd", "3rd"}
	waiters := make([]*proc, len(names))
	for i, n := range names {
		errPath := filepath.Join(dir, "err."+n)
		waiters[i] = startLogged(t, append(env, "NAME="+n), errPath,
			"run", "--fair", "--key", key, "--", "sh", "-c", `echo "$NAME" >> "$DIR/order"`)
		waitForText(t, errPath, "turnstile: you are "+places[i]+" in line for "+key, time.Minute)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(t, time.Minute); r.code != 0 {
		t.Fatalf("holder: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	for i, w := range waiters {
		if r := w.wait(t, time.Minute); r.code != 0 {
			b, _ := os.ReadFile(filepath.Join(dir, "err."+names[i]))
			t.Fatalf("waiter %s: exit code %d; stderr:\n%s", names[i], r.code, b)
		}
	}
	order, err := os.ReadFile(filepath.Join(dir, "order"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(order)); strings.Join(got, " ") != "A B C" {
		t.Fatalf("served in the order %v, want A B C (the order they lined up in)", got)
	}
	for i, n := range names {
		b, _ := os.ReadFile(filepath.Join(dir, "err."+n))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		ok := len(lines) > 0 && lines[0] == "turnstile: you are "+places[i]+" in line for "+key
		last := i
		for _, l := range lines[1:] {
			j := slices.IndexFunc(places[:last], func(p string) bool { return l == "turnstile: you are "+p+" in line for "+key })
			if j < 0 {
				ok = false
				break
			}
			last = j
		}
		if !ok {
			t.Errorf("waiter %s said:\n%s\nwant %q first, then only smaller places", n, b, "turnstile: you are "+places[i]+" in line for "+key)
		}
	}
}

func TestRunFairRedis(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	checkFairOrder(t, srv.URL())
}

// startHolders starts a turnstile run with args per name, one after
// another, each holding with holdScript and $DIR a new directory of that
// name in dir; each holds before the next starts.
func startHolders(t *testing.T, env []string, dir string, names []string, args ...string) []*proc {
	t.Helper()
	var holders []*proc
	for _, n := range names {
		d := filepath.Join(dir, n)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, startTurnstile(t, append(env, "DIR="+d), append(append([]string{"run"}, args...), "--", "sh", "-c", holdScript)...))
		waitForFile(t, filepath.Join(d, "held"), time.Minute)
	}
	return holders
}

// TestRunShared: two --shared runs hold KEY together, while an
// --exclusive run waits for both and runs alone.
func TestRunShared(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	dir := t.TempDir()
	env := []string{"TURNSTILE_BACKEND=" + srv.URL()}
	const key = "lock:cli:rw"
	// The second gets in while the first holds.
	readers := startHolders(t, env, dir, []string{"r1", "r2"}, "--shared", "--key", key)
	if r := runTurnstile(t, env, "run", "--exclusive", "--no-wait", "--key", key, "--", "true"); r.code != exitNotAcquired {
		t.Fatalf("--exclusive --no-wait while two readers hold: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	done := filepath.Join(dir, "writer")
	writer := startTurnstile(t, append(env, "R1="+filepath.Join(dir, "r1"), "R2="+filepath.Join(dir, "r2"), "OUT="+done), "run", "--exclusive", "--key", key, "--", "sh", "-c",
		// Readers still inside would not have their "go" yet.
		`if [ -e "$R1/go" ] && [ -e "$R2/go" ]; then echo alone > "$OUT"; else echo overlapped > "$OUT"; fi`)
	time.Sleep(500 * time.Millisecond)
	if exists(done) {
		t.Fatal("the --exclusive run ran while --shared runs held the lock")
	}
	for i, r := range readers {
		if err := os.WriteFile(filepath.Join(dir, []string{"r1", "r2"}[i], "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if res := r.wait(t, time.Minute); res.code != 0 {
			t.Fatalf("reader %d: exit code %d; stderr:\n%s", i+1, res.code, res.stderr)
		}
	}
	if r := writer.wait(t, time.Minute); r.code != 0 {
		t.Fatalf("writer: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(done); strings.TrimSpace(string(b)) != "alone" {
		t.Fatalf("the --exclusive run: %q, want alone", b)
	}
}

// TestRunSemaphore: --semaphore 2 admits two runs at once, not three.
func TestRunSemaphore(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	dir := t.TempDir()
	env := []string{"TURNSTILE_BACKEND=" + srv.URL()}
	const key = "lock:cli:sem"
	holders := startHolders(t, env, dir, []string{"h1", "h2"}, "--semaphore", "2", "--key", key)
	if r := runTurnstile(t, env, "run", "--semaphore", "2", "--no-wait", "--key", key, "--", "true"); r.code != exitNotAcquired {
		t.Fatalf("a third --semaphore 2 run: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "h1", "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := holders[0].wait(t, time.Minute); r.code != 0 {
		t.Fatalf("first holder: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if r := runTurnstile(t, env, "run", "--semaphore", "2", "--no-wait", "--key", key, "--", "true"); r.code != 0 {
		t.Fatalf("a run once a permit is back: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "h2", "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holders[1].wait(t, time.Minute)
}

// TestRunKindUsageErrors: kind flags that exclude each other, a bad
// --semaphore and a kind the store lacks are usage errors, each one line
// plus the usage hint, before any command runs.
func TestRunKindUsageErrors(t *testing.T) {
	t.Parallel()
	ran := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shared", "--fair"}, "--fair and --shared exclude each other"},
		{[]string{"--semaphore", "2", "--exclusive"}, "exclude each other"},
		{[]string{"--semaphore", "0"}, "from 1 to"},
		{[]string{"--semaphore", "two"}, "from 1 to"},
	} {
		args := append(append([]string{"run", "--key", "k"}, tc.args...), "--", "touch", ran)
		r := runTurnstile(t, nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit code %d, want %d with %q; stderr:\n%s", tc.args, r.code, exitUsage, tc.want, r.stderr)
		}
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "turnstile run -h") {
			t.Errorf("%q: want one line and the usage hint, got:\n%s", tc.args, r.stderr)
		}
	}
	if exists(ran) {
		t.Fatal("a command ran despite a usage error")
	}
}

// plainStore is a backend with the plain lock only.
type plainStore struct{ driver.Backend }

func (plainStore) Name() string { return "plain" }

// TestKindClientStoreWithoutKind: a kind the store lacks is a usage error
// naming the flag, the stores that have it and the URL's scheme; the
// Client is closed.
func TestKindClientStoreWithoutKind(t *testing.T) {
	for _, tc := range []struct {
		o    runOptions
		want string
	}{
		{runOptions{kind: kindShared}, "--shared needs a store with read-write locks; postgres:// has none"},
		{runOptions{kind: kindExclusive}, "--exclusive needs a store with read-write locks"},
		{runOptions{kind: kindSemaphore, permits: 3}, "--semaphore 3 needs a store with semaphores (every store but redlock)"},
		{runOptions{kind: kindFair}, "--fair needs a store with a fair queue"},
	} {
		c, err := turnstile.New(plainStore{memory.New()})
		if err != nil {
			t.Fatal(err)
		}
		tc.o.backend = "postgres://u@h/db"
		kc, err := tc.o.kindClient(c, nil)
		if kc != nil || !errors.Is(err, errNoKind) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v; want errNoKind with %q", tc.o.kindFlag(), kc, err, tc.want)
		}
		if _, err := c.TryAcquire(context.Background(), "k"); !errors.Is(err, turnstile.ErrClosed) {
			t.Errorf("%s: the Client is open after the refusal: %v", tc.o.kindFlag(), err)
		}
	}
}

// TestRunKindsInMemory: the in-process store has every kind the command
// offers.
func TestRunKindsInMemory(t *testing.T) {
	t.Parallel()
	for _, kind := range [][]string{{"--shared"}, {"--exclusive"}, {"--semaphore", "3"}, {"--fair"}} {
		ran := filepath.Join(t.TempDir(), "ran")
		args := append(append([]string{"run", "--backend", "mem://", "--key", "k"}, kind...), "--", "touch", ran)
		if r := runTurnstile(t, nil, args...); r.code != 0 || !exists(ran) {
			t.Errorf("%q on mem://: exit code %d, ran %v; stderr:\n%s", kind, r.code, exists(ran), r.stderr)
		}
	}
}
