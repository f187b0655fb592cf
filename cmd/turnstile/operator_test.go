//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testserver"
	_ "github.com/turnstilelock/turnstile/redis"
)

// TestOperatorUsageErrors: every bad input of status, ls and unlock is
// refused at once with exit 64 and one line saying what is wrong (and the
// hint to -h), before any connection: the URL names a port nothing
// listens on.
func TestOperatorUsageErrors(t *testing.T) {
	t.Setenv("TURNSTILE_BACKEND", "redis://127.0.0.1:1")
	defer func(f func() bool) { stdinIsTerminal = f }(stdinIsTerminal)
	stdinIsTerminal = func() bool { return false }
	long := strings.Repeat("k", 513)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"status without key", []string{"status"}, "missing KEY"},
		{"status empty key", []string{"status", ""}, "KEY must not be empty"},
		{"status huge key", []string{"status", long}, "the limit is 512"},
		{"status two keys", []string{"status", "a", "b"}, `one KEY only; also got "b"`},
		{"status unknown flag", []string{"status", "k", "--bogus"}, "flag provided but not defined: -bogus"},
		{"status empty backend", []string{"status", "k", "--backend", ""}, "--backend must not be empty"},
		{"status bad timeout", []string{"status", "k", "--timeout", "0s"}, "--timeout 0s must be positive"},
		{"status unknown scheme", []string{"status", "k", "--backend", "foo://x"}, `unknown backend scheme: "foo"`},
		{"status unknown kind", []string{"status", "k", "--kind", "mutex"}, `invalid value "mutex" for flag -kind: want a lock kind: plain, fair, shared, exclusive, read-write, semaphore or reentrant`},
		{"status empty kind", []string{"status", "k", "--kind", ""}, `invalid value "" for flag -kind`},
		{"ls unknown kind", []string{"ls", "--kind", "Semaphore"}, `invalid value "Semaphore" for flag -kind`},
		{"unlock unknown kind", []string{"unlock", "k", "--force", "--yes", "--kind", "--shared"}, `invalid value "--shared" for flag -kind`},
		{"ls limit 0", []string{"ls", "--limit", "0"}, "--limit 0 must be positive"},
		{"ls negative limit", []string{"ls", "--limit", "-3"}, "--limit -3 must be positive"},
		{"ls limit not a number", []string{"ls", "--limit", "many"}, `invalid value "many" for flag -limit`},
		{"ls argument", []string{"ls", "lock:"}, `ls takes no arguments, got "lock:"`},
		{"ls huge prefix", []string{"ls", "--prefix", long}, "--prefix is 513 bytes long"},
		{"ls unknown flag", []string{"ls", "--bogus"}, "flag provided but not defined: -bogus"},
		{"unlock without key", []string{"unlock", "--force", "--yes"}, "missing KEY"},
		{"unlock empty key", []string{"unlock", "", "--force", "--yes"}, "KEY must not be empty"},
		{"unlock without force", []string{"unlock", "k"}, "pass --force"},
		{"unlock without force but yes", []string{"unlock", "k", "--yes"}, "pass --force"},
		{"unlock not a terminal", []string{"unlock", "k", "--force"}, "stdin is not a terminal"},
		{"unlock unknown flag", []string{"unlock", "k", "--force", "--yes", "--bogus"}, "flag provided but not defined: -bogus"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if !strings.Contains(lines[0], tt.want) {
				t.Errorf("first line of stderr does not say %q:\n%s", tt.want, stderr.String())
			}
			if len(lines) > 2 || (len(lines) == 2 && !strings.HasPrefix(lines[1], "Run \"turnstile ")) {
				t.Errorf("stderr is more than the error and the hint:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty on a usage error:\n%s", stdout.String())
			}
		})
	}
}

// TestOperatorHelp: each command's help documents its flags, JSON and
// exit codes.
func TestOperatorHelp(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"status": {"--json", "--held", `"ttl_ms"`, "--backend URL", "Exit status:", "69", "--kind K", `"kinds"`, "every kind the store"},
		"ls":     {"--prefix", "--limit N", "SCAN", "O(keys in the database)", `"more"`, "Exit status:", "--kind K", "lock kind"},
		"unlock": {"--force", "--yes", "fence floor", "not a terminal", "exits 79", "Exit status:", "was not held", "--kind K", "more than one"},
	} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), []string{"help", cmd}, &stdout, &stderr); code != exitOK {
			t.Errorf("help %s: exit %d", cmd, code)
		}
		for _, w := range wants {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("help %s does not mention %q", cmd, w)
			}
		}
	}
}

// TestStatusAndLs: status and ls against a real Redis, with locks held
// by a running "turnstile run" and by a Client.
func TestStatusAndLs(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	ctx := testserver.Ctx(t, 2*time.Minute)

	const ttl = 6 * time.Second
	p := startTurnstile(t, env, "run", "--key", "ops:run", "--ttl", ttl.String(), "--",
		"sh", "-c", `echo "$TURNSTILE_TOKEN" > "$DIR/token"; touch "$DIR/ready"; sleep 60`)
	waitForFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	runToken := tokenInFile(t, filepath.Join(dir, "token"))

	c, err := turnstile.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, k := range []string{"ops:b", "ops:c", "other:d"} {
		if _, err := c.Acquire(ctx, k, turnstile.WithTTL(ttl)); err != nil {
			t.Fatal(err)
		}
	}

	// status of the key the run holds: text and JSON.
	r := runTurnstile(t, env, "status", "ops:run")
	if r.code != exitOK || !strings.Contains(r.stdout, "ops:run is held") || !strings.Contains(r.stdout, strconv.FormatUint(runToken, 10)) {
		t.Errorf("status ops:run: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runTurnstile(t, env, "status", "--json", "ops:run")
	var st jsonState
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != exitOK {
		t.Fatalf("status --json: exit %d, %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	// Waiters 0: Redis counts the line of --fair runs for the plain lock.
	if !st.Held || st.Key != "ops:run" || len(st.Holders) != 1 || st.Holders[0].Token != runToken ||
		st.Holders[0].TTLMs <= 0 || st.Holders[0].TTLMs > ttl.Milliseconds() || st.Token != runToken || st.Waiters != 0 ||
		!strings.Contains(st.Holders[0].Owner, "/") || st.Holders[0].Kind != "plain" || strings.Join(st.Kinds, ",") != "plain" {
		t.Errorf("status --json = %+v, want held by the run (token %d) with up to %v left", st, runToken, ttl)
	}

	// A free key: exit 0, or 1 with --held.
	r = runTurnstile(t, env, "status", "ops:free")
	if r.code != exitOK || !strings.Contains(r.stdout, "ops:free is free") {
		t.Errorf("status of a free key: exit %d, stdout %q", r.code, r.stdout)
	}
	if r = runTurnstile(t, env, "status", "--held", "ops:free"); r.code != 1 {
		t.Errorf("status --held of a free key: exit %d, want 1", r.code)
	}
	if r = runTurnstile(t, env, "status", "ops:run", "--held"); r.code != exitOK {
		t.Errorf("status --held of a held key: exit %d, want 0", r.code)
	}
	r = runTurnstile(t, env, "status", "--json", "ops:free")
	if r.stdout != `{"key":"ops:free","held":false,"kinds":[],"holders":[],"token":0,"waiters":0}`+"\n" {
		t.Errorf("status --json of a never-held key = %q", r.stdout)
	}

	// ls: exactly the held keys under the prefix, sorted; the limit.
	r = runTurnstile(t, env, "ls", "--prefix", "ops:")
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != exitOK || len(rows) != 4 || !strings.HasPrefix(rows[0], "KEY") ||
		!strings.HasPrefix(rows[1], "ops:b ") || !strings.HasPrefix(rows[2], "ops:c ") || !strings.HasPrefix(rows[3], "ops:run ") ||
		!strings.Contains(rows[3], strconv.FormatUint(runToken, 10)) || r.stderr != "" {
		t.Errorf("ls --prefix ops: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runTurnstile(t, env, "ls", "--prefix", "ops:", "--limit", "2")
	if rows := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != exitOK || len(rows) != 3 || !strings.Contains(r.stderr, "than the 2 shown") {
		t.Errorf("ls --limit 2: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runTurnstile(t, env, "ls", "--json", "--limit", "10")
	var list struct {
		Locks []jsonState `json:"locks"`
		More  bool        `json:"more"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != exitOK {
		t.Fatalf("ls --json: exit %d, %v:\n%s", r.code, err, r.stdout)
	}
	var keys []string
	for _, l := range list.Locks {
		keys = append(keys, l.Key)
	}
	if strings.Join(keys, ",") != "ops:b,ops:c,ops:run,other:d" || list.More {
		t.Errorf("ls --json = %q more=%v, want every held key", keys, list.More)
	}
	r = runTurnstile(t, env, "ls", "--json", "--prefix", "none:")
	if r.stdout != `{"locks":[],"more":false}`+"\n" {
		t.Errorf("ls --json with nothing held = %q", r.stdout)
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	p.wait(t, 20*time.Second)
}

// TestUnlockForceStopsRun: unlock --force removes the lock of a running
// "turnstile run", which stops its command and exits 79; the removed
// holder's fenced writes are refused at once (the guard was raised), and
// still after the next holder wrote.
func TestUnlockForceStopsRun(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	ctx := testserver.Ctx(t, 2*time.Minute)
	const key = "ops:stuck"

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	strict, err := fence.NewRedis(rc)
	if err != nil {
		t.Fatal(err)
	}
	lenient, err := fence.NewRedis(rc, fence.AllowSameToken())
	if err != nil {
		t.Fatal(err)
	}
	data := fence.DataKey(key, "report")

	const ttl = 1500 * time.Millisecond
	p := startTurnstile(t, env, "run", "--key", key, "--ttl", ttl.String(), "--grace", "5s", "--",
		"sh", "-c", `trap 'echo term > "$DIR/term"; exit 0' TERM
echo "$TURNSTILE_TOKEN" > "$DIR/token"; touch "$DIR/ready"
sleep 60 & wait`)
	waitForFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	old := tokenInFile(t, filepath.Join(dir, "token"))
	// The holder writes through the guard while it holds the lock.
	if err := strict.Set(ctx, key, old, data, "by the old holder"); err != nil {
		t.Fatalf("the holder's fenced write: %v", err)
	}

	r := runTurnstile(t, env, "unlock", key, "--force", "--yes")
	unlocked := time.Now()
	if r.code != exitOK {
		t.Fatalf("unlock --force --yes: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"removed the lock on " + key, "token             " + strconv.FormatUint(old, 10),
		"new fence floor   " + strconv.FormatUint(old-old%16+16, 10), "owner             "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("unlock's stdout does not say %q:\n%s", want, r.stdout)
		}
	}

	// The run learns it at its next renewal, stops its command, exits 79.
	res := p.wait(t, 20*time.Second)
	if res.code != exitLeaseLost {
		t.Errorf("the run exited %d, want %d (lease lost); stderr:\n%s", res.code, exitLeaseLost, res.stderr)
	}
	if took := time.Since(unlocked); took > ttl+5*time.Second {
		t.Errorf("the run stopped %v after the unlock, want within about a renewal (%v)", took, ttl/3)
	}
	if !exists(filepath.Join(dir, "term")) || !strings.Contains(res.stderr, "lost") {
		t.Errorf("the command did not get SIGTERM, or stderr does not say the lease was lost:\n%s", res.stderr)
	}

	// The old token is refused at once, even by a guard that accepts an
	// equal token: the guard was raised past it.
	var stale *fence.StaleTokenError
	if err := lenient.Set(ctx, key, old, data, "late write"); !errors.As(err, &stale) {
		t.Errorf("a late write with the removed token through AllowSameToken = %v, want a stale token error", err)
	}
	// The next holder writes; the old token stays refused.
	c, err := turnstile.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= old-old%16+16 {
		t.Errorf("next token %d, want above the fence floor %d", l.Token(), old-old%16+16)
	}
	if err := strict.Set(ctx, key, l.Token(), data, "by the next holder"); err != nil {
		t.Fatalf("the next holder's fenced write: %v", err)
	}
	if err := strict.Set(ctx, key, old, data, "late write"); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("a late write with the removed token after the next holder's = %v, want ErrStaleToken", err)
	}
	if v := srv.MustDo(t, "GET", data); v != "by the next holder" {
		t.Errorf("data = %q, want the next holder's write", v)
	}
	_ = l.Release(ctx)

	// Nothing held now: exit 1, "was not held".
	r = runTurnstile(t, env, "unlock", key, "--force", "--yes")
	if r.code != 1 || !strings.Contains(r.stderr, key+" was not held") || r.stdout != "" {
		t.Errorf("unlock of a free key: exit %d, stdout %q, stderr %q; want 1 and \"was not held\"", r.code, r.stdout, r.stderr)
	}
}

// TestUnlockConfirms: on a terminal, unlock shows the holder and removes
// the lock only after "y".
func TestUnlockConfirms(t *testing.T) {
	srv := testserver.StartRedis(t)
	t.Setenv("TURNSTILE_BACKEND", srv.URL())
	ctx := testserver.Ctx(t, time.Minute)
	defer func(f func() bool, in io.Reader) { stdinIsTerminal, confirmIn = f, in }(stdinIsTerminal, confirmIn)
	stdinIsTerminal = func() bool { return true }

	c, err := turnstile.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Acquire(ctx, "ops:ask")
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{"n\n", "\n", ""} {
		confirmIn = strings.NewReader(answer)
		var stdout, stderr bytes.Buffer
		code := dispatch(ctx, []string{"unlock", "ops:ask", "--force"}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "held by "+l.Owner()) || !strings.Contains(stderr.String(), "nothing removed") {
			t.Errorf("answer %q: exit %d, stderr:\n%s", answer, code, stderr.String())
		}
	}
	if st, err := c.Inspect(ctx, "ops:ask"); err != nil || !st.Held {
		t.Fatalf("the lock went without a yes: %+v %v", st, err)
	}
	confirmIn = strings.NewReader("y\n")
	var stdout, stderr bytes.Buffer
	if code := dispatch(ctx, []string{"unlock", "ops:ask", "--force"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("answer y: exit %d, stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), l.Owner()) {
		t.Errorf("stdout does not name the removed owner:\n%s", stdout.String())
	}
	if st, err := c.Inspect(ctx, "ops:ask"); err != nil || st.Held {
		t.Errorf("after y the lock is %+v, %v; want free", st, err)
	}
}

// TestOperatorHidesPassword: a store that refuses the password is
// reported without it.
func TestOperatorHidesPassword(t *testing.T) {
	// A refused dial leaves rueidis's delayed topology refresh behind.
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t, rueidisDelayDo) })
	srv := testserver.StartRedis(t)
	url := strings.Replace(srv.URL(), "redis://", "redis://user:s3cr3t-pw@", 1)
	for _, args := range [][]string{{"status", "k"}, {"ls"}, {"unlock", "k", "--force", "--yes"}} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), append(args, "--backend", url, "--timeout", "5s"), &stdout, &stderr)
		if code == exitOK || strings.Contains(stderr.String()+stdout.String(), "s3cr3t-pw") {
			t.Errorf("%v: exit %d, output shows the password or succeeded:\n%s%s", args, code, stdout.String(), stderr.String())
		}
	}
}

func tokenInFile(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("token file %q: %v", b, err)
	}
	return tok
}
