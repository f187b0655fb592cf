package locktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// patient waits as long as the case's context allows, with short sleeps.
var patient = turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1})

// testMutualExclusionGoroutines runs a non-atomic read-modify-write under
// the lock from 64 goroutines over 4 clients. A second holder at any moment
// shows up as an overlap or as a lost update.
func testMutualExclusionGoroutines(t *testing.T, h *Harness) {
	const clients, perClient, rounds = 4, 16, 12
	k := key(t)
	ctx := ctxFor(t, 2*time.Minute)
	var (
		counter atomic.Int64 // read and written separately: a non-atomic increment
		inside  atomic.Int32
		overlap atomic.Int32
		tokens  [clients * perClient * rounds]atomic.Uint64
		workers []func() error
	)
	for range clients {
		c := h.client(t, patient, turnstile.WithTTL(10*time.Second))
		for range perClient {
			workers = append(workers, func() error {
				l, err := c.Acquire(ctx, k)
				if err != nil {
					return fmt.Errorf("acquire: %w", err)
				}
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				v := counter.Load()
				runtime.Gosched()
				tokens[v].Store(l.Token())
				counter.Store(v + 1)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					return fmt.Errorf("release: %w", err)
				}
				return nil
			})
		}
	}
	inTurn(t, rounds, workers)
	if n := overlap.Load(); n > 0 {
		t.Fatalf("%d critical sections overlapped", n)
	}
	if got, want := counter.Load(), int64(clients*perClient*rounds); got != want {
		t.Fatalf("counter = %d after %d locked increments: updates were lost", got, want)
	}
	for i := 1; i < len(tokens); i++ {
		if a, b := tokens[i-1].Load(), tokens[i].Load(); b <= a {
			t.Fatalf("holder %d got token %d, not greater than holder %d's %d", i, b, i-1, a)
		}
	}
}

// Environment of child processes.
const (
	envRole  = "TURNSTILE_LOCKTEST_ROLE"
	envURL   = "TURNSTILE_LOCKTEST_URL"
	envKey   = "TURNSTILE_LOCKTEST_KEY"
	envFile  = "TURNSTILE_LOCKTEST_FILE"
	envN     = "TURNSTILE_LOCKTEST_N"
	envTTL   = "TURNSTILE_LOCKTEST_TTL"
	roleIncr = "increment"
	roleHold = "hold"
)

// testMutualExclusionProcesses runs the read-modify-write on a file from
// three OS processes, each with its own connection to the store.
func testMutualExclusionProcesses(t *testing.T, h *Harness) {
	const procs, rounds = 3, 40
	dir := t.TempDir()
	file := filepath.Join(dir, "counter")
	if err := os.WriteFile(file, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	k := key(t)
	cmds := make([]*exec.Cmd, procs)
	outs := make([]strings.Builder, procs)
	for i := range cmds {
		cmds[i] = child(t, h, roleIncr, k, map[string]string{envFile: file, envN: strconv.Itoa(rounds)})
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatalf("start child: %v", err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(data)), strconv.Itoa(procs*rounds); got != want {
		t.Fatalf("file counter = %s after %s locked increments by %d processes: updates were lost", got, want, procs)
	}
	log, err := os.ReadFile(file + ".tokens")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(log))
	if len(lines) != procs*rounds {
		t.Fatalf("token log has %d entries, want %d", len(lines), procs*rounds)
	}
	var last uint64
	for i, s := range lines {
		tok, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("token log line %d: %v", i, err)
		}
		if tok <= last {
			t.Fatalf("critical section %d ran with token %d, not greater than the previous %d", i, tok, last)
		}
		last = tok
	}
}

// child prepares a re-run of the test binary in a child role.
func child(t *testing.T, h *Harness, role, key string, env map[string]string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envURL+"="+h.URL, envKey+"="+key)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// startChild starts cmd with its standard output piped and its standard
// error kept; when the test ends it kills the child, waits for it, and
// logs its standard error if the test failed.
func startChild(t *testing.T, cmd *exec.Cmd) (*bufio.Reader, *strings.Builder) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})
	return bufio.NewReader(out), stderr
}

// RunChild acts as a child process of a multi-process case when the
// environment says so, and exits; otherwise it returns at once. Call it
// first thing in TestMain of every package that runs the suite with a URL.
func RunChild() {
	role := os.Getenv(envRole)
	if role == "" {
		return
	}
	if err := runChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "locktest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []turnstile.Option{patient}
	if d, err := time.ParseDuration(os.Getenv(envTTL)); err == nil {
		opts = append(opts, turnstile.WithTTL(d))
	}
	c, err := turnstile.Open(ctx, os.Getenv(envURL), opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if name := os.Getenv(envView); name != "" {
		if c, err = viewClient(c, name, opts); err != nil {
			return err
		}
		defer c.Close()
	}
	key := os.Getenv(envKey)
	switch role {
	case roleIncr:
		n, err := strconv.Atoi(os.Getenv(envN))
		if err != nil {
			return err
		}
		for range n {
			if err := incrementFile(ctx, c, key, os.Getenv(envFile)); err != nil {
				return err
			}
		}
		return nil
	case roleHold:
		l, err := c.Acquire(ctx, key)
		if err != nil {
			return err
		}
		fmt.Printf("HELD %d\n", l.Token())
		<-l.Context().Done() // until killed, or the lease is lost
		return context.Cause(l.Context())
	}
	if run, ok := kindRoles[role]; ok {
		return run(ctx, c, key)
	}
	return fmt.Errorf("unknown role %q", role)
}

// incrementFile is the unprotected read-modify-write the lock must
// serialise, plus an append of the holder's token.
func incrementFile(ctx context.Context, c *turnstile.Client, key, file string) error {
	return turnstile.Do(ctx, c, key, func(_ context.Context, l *turnstile.Lease) error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return err
		}
		time.Sleep(200 * time.Microsecond) // widen the window a second writer would hit
		if err := os.WriteFile(file, []byte(strconv.Itoa(v+1)), 0o600); err != nil {
			return err
		}
		f, err := os.OpenFile(file+".tokens", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(f, l.Token())
		return errors.Join(err, f.Close())
	}, turnstile.WithTTL(10*time.Second))
}

// holdInChild starts a child that acquires key with ttl and blocks; it
// returns the child and the token it got.
func holdInChild(t *testing.T, h *Harness, key string, ttl time.Duration) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := child(t, h, roleHold, key, map[string]string{envTTL: ttl.String()})
	out, stderr := startChild(t, cmd)
	tok, err := readHeld(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	return cmd, tok
}
