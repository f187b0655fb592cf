//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// These tests run the built binary as a Redis ACL user made with the
// recipes of the Redis ACL documentation: the keys and channels of the
// URL's prefix, and the commands turnstile sends.

// aclPassword is the ACL user's password: no output may contain it.
const aclPassword = "Cli-acl-pw-5e0f1b"

// aclLocking are the commands of locking (every lock kind, waiting on
// release notices, renewals, fencing).
var aclLocking = []string{
	"evalsha", "eval", "ssubscribe", "sunsubscribe", "ping", "cluster|slots",
	"get", "set", "append", "del", "exists", "pexpire", "pttl", "persist", "time", "incr", "spublish",
	"hexists", "hget", "hset", "hincrby",
	"zadd", "zrem", "zrank", "zcard", "zscore", "zrangebyscore", "zremrangebyscore",
}

// aclOperating are what status, ls and unlock add.
var aclOperating = []string{"scan", "type", "zcount", "hkeys"}

// setACLUser replaces the ACL user turnstile: the keys and channels of
// the prefix app:, and cmds; extra rules last.
func setACLUser(t *testing.T, srv *testserver.Redis, cmds []string, extra ...string) {
	t.Helper()
	args := []string{"ACL", "SETUSER", "turnstile", "reset", "on", ">" + aclPassword,
		"resetkeys", "~app:*", "resetchannels", "&app:*", "-@all"}
	for _, c := range cmds {
		args = append(args, "+"+c)
	}
	srv.MustDo(t, append(args, extra...)...)
}

// dropping returns cmds without drop.
func dropping(cmds []string, drop string) []string {
	var out []string
	for _, c := range cmds {
		if c != drop {
			out = append(out, c)
		}
	}
	return out
}

// checkNoPassword fails the test if r's output shows the password.
func checkNoPassword(t *testing.T, what string, r result) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, aclPassword) {
		t.Errorf("%s shows the password:\nstdout:\n%s\nstderr:\n%s", what, r.stdout, r.stderr)
	}
}

// checkPermissionExit checks that r is turnstile's permission failure:
// exit 69, the error naming want, and the hint line.
func checkPermissionExit(t *testing.T, what string, r result, want string) {
	t.Helper()
	if r.code != exitUnavailable {
		t.Errorf("%s: exit code %d, want %d; stderr:\n%s", what, r.code, exitUnavailable, r.stderr)
	}
	if !strings.Contains(r.stderr, "permission denied") || !strings.Contains(r.stderr, want) {
		t.Errorf("%s: stderr does not say permission denied for %s:\n%s", what, want, r.stderr)
	}
	if !strings.Contains(r.stderr, "\nhint: the store's user lacks a permission turnstile needs") {
		t.Errorf("%s: stderr has no hint line:\n%s", what, r.stderr)
	}
	checkNoPassword(t, what, r)
}

// TestRunRedisACL: turnstile run as an ACL user with exactly the
// locking recipe takes the lock, waits behind another run and gets the
// next token; the same user less one permission exits 69 with the hint
// and the missing command, and a wrong password is refused; the password
// shows nowhere.
func TestRunRedisACL(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	url := "redis://turnstile:" + aclPassword + "@" + srv.Addr() + "?prefix=app:"
	setACLUser(t, srv, aclLocking)

	// A holder, and a second run that waits for it.
	dir := t.TempDir()
	env := []string{"DIR=" + dir}
	holder := startTurnstile(t, env, "run", "--backend", url, "--key", "job", "--ttl", "10s", "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)
	first := readToken(t, filepath.Join(dir, "held"))
	if got := srv.MustDo(t, "EXISTS", "app:{job}"); got != "1" {
		t.Fatalf("the lock key app:{job} does not exist while the run holds the lock")
	}
	waiter := startTurnstile(t, env, "run", "--backend", url, "--key", "job", "--ttl", "10s", "--",
		"sh", "-c", `echo "$TURNSTILE_TOKEN" > "$DIR/second"`)
	time.Sleep(300 * time.Millisecond)
	if exists(filepath.Join(dir, "second")) {
		t.Fatal("the second run ran while the first held the lock")
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := holder.wait(t, time.Minute)
	if r.code != 0 {
		t.Fatalf("holder: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	checkNoPassword(t, "holder", r)
	r = waiter.wait(t, time.Minute)
	if r.code != 0 {
		t.Fatalf("waiter: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	checkNoPassword(t, "waiter", r)
	if second := readToken(t, filepath.Join(dir, "second")); second <= first {
		t.Errorf("the waiter's token %d is not above the holder's %d", second, first)
	}

	// The password from a file, and the backend from the environment.
	pwFile := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pwFile, []byte(aclPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileURL := "redis://turnstile@" + srv.Addr() + "?prefix=app:&password_file=" + pwFile
	r = runTurnstile(t, []string{"TURNSTILE_BACKEND=" + fileURL}, "run", "--key", "job", "--no-wait", "--", "true")
	if r.code != 0 {
		t.Errorf("run with password_file: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}

	// One permission less, each in turn.
	for _, tc := range []struct {
		drop, want string
	}{
		{"evalsha", "EVALSHA"},
		{"time", "TIME"},
		{"set", "SET"},
	} {
		setACLUser(t, srv, dropping(aclLocking, tc.drop))
		r := runTurnstile(t, nil, "run", "--backend", url, "--key", "job", "--", "true")
		checkPermissionExit(t, "run without +"+tc.drop, r, tc.want)
	}
	// No key pattern for the prefix.
	srv.MustDo(t, "ACL", "SETUSER", "turnstile", "resetkeys", "~other:*")
	r = runTurnstile(t, nil, "run", "--backend", url, "--key", "job", "--", "true")
	checkPermissionExit(t, "run without the prefix's key pattern", r, `"app:{job}"`)

	// No channel pattern: the lock is taken and the command runs — it
	// fails to take the lock too, so the release has a waiter to tell —
	// and the release, refused, is reported; the lock expires by itself.
	setACLUser(t, srv, aclLocking, "resetchannels")
	r = runTurnstile(t, nil, "run", "--backend", url, "--key", "job", "--ttl", "2s", "--",
		binary, "run", "--backend", url, "--key", "job", "--no-wait", "--", "true")
	if !strings.Contains(r.stderr, "release") || !strings.Contains(r.stderr, `"app:{job}:released"`) || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("run without the channel pattern: exit %d, stderr does not report the refused release notice:\n%s", r.code, r.stderr)
	}
	checkNoPassword(t, "run without the channel pattern", r)

	// A wrong password.
	setACLUser(t, srv, aclLocking)
	wrong := "redis://turnstile:" + aclPassword + "x@" + srv.Addr() + "?prefix=app:"
	r = runTurnstile(t, nil, "run", "--backend", wrong, "--key", "job", "--", "true")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "WRONGPASS") {
		t.Errorf("run with a wrong password: exit code %d, want %d and WRONGPASS; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	checkNoPassword(t, "run with a wrong password", r)
}

// TestOperatorRedisACL: status, ls and unlock --force as an ACL user
// with the operator recipe (the locking one, SCAN and the inspect
// scripts' commands, and the fence guard keys), and ls as a user
// without SCAN: exit 69 with the hint.
func TestOperatorRedisACL(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	url := "redis://turnstile:" + aclPassword + "@" + srv.Addr() + "?prefix=app:"
	setACLUser(t, srv, append(append([]string{}, aclLocking...), aclOperating...), "~{*}:guard")
	env := []string{"TURNSTILE_BACKEND=" + url}
	dir := t.TempDir()
	holder := startTurnstile(t, append(env, "DIR="+dir), "run", "--key", "ops:job", "--ttl", "10s", "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)

	r := runTurnstile(t, env, "status", "ops:job")
	if r.code != exitOK || !strings.Contains(r.stdout, "ops:job is held") {
		t.Errorf("status: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkNoPassword(t, "status", r)
	r = runTurnstile(t, env, "ls", "--prefix", "ops:")
	if r.code != exitOK || !strings.Contains(r.stdout, "ops:job") {
		t.Errorf("ls: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkNoPassword(t, "ls", r)
	r = runTurnstile(t, env, "unlock", "ops:job", "--force", "--yes")
	if r.code != exitOK {
		t.Errorf("unlock --force: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkNoPassword(t, "unlock --force", r)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder.wait(t, time.Minute)

	// The locking recipe alone: status and ls are refused.
	setACLUser(t, srv, aclLocking)
	r = runTurnstile(t, env, "ls")
	checkPermissionExit(t, "ls without +scan", r, "SCAN")
	r = runTurnstile(t, env, "status", "ops:job")
	checkPermissionExit(t, "status without +type", r, "TYPE")
}

// TestBenchRedisACL: turnstile bench --url as an ACL user needs INFO
// besides the locking recipe: without it the run stops before any cell
// with exit 69 and says so; with it a cell runs and exits 0. The
// password shows nowhere.
func TestBenchRedisACL(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	url := "redis://turnstile:" + aclPassword + "@" + srv.Addr() + "?prefix=app:"
	args := []string{"bench", "--url", url, "--duration", "1s", "--only", "uncontended/c=1$"}

	setACLUser(t, srv, aclLocking)
	r := runTurnstile(t, nil, args...)
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "+info") {
		t.Errorf("bench without +info: exit %d, want %d and the advice +info; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	checkNoPassword(t, "bench without +info", r)

	setACLUser(t, srv, append(append([]string{}, aclLocking...), "info"))
	srv.MustDo(t, "ACL", "LOG", "RESET")
	r = runTurnstile(t, nil, args...)
	if r.code != exitOK {
		t.Errorf("bench with the bench recipe: exit %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	checkNoPassword(t, "bench", r)
	// Do returns the array's length.
	if n := srv.MustDo(t, "ACL", "LOG"); n != "0" {
		t.Errorf("the server refused the bench's user %s times", n)
	}
}
