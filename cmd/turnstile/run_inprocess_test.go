//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests call runCmd in this process on the in-process mem://
// backend, so the race detector and the leak check of TestMain see the
// supervision code itself.

func runInProcess(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"--backend", "mem://"}, args...)
	code = runCmd(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// cancelWhenReady sets $DIR to a new temporary directory and returns a
// context that is cancelled once the command has created the file ready
// in it, and the directory.
func cancelWhenReady(t *testing.T) (context.Context, string) {
	dir := t.TempDir()
	t.Setenv("DIR", dir)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil && !exists(filepath.Join(dir, "ready")) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	return ctx, dir
}

func TestRunInProcessPassesKeyTokenAndEnvironment(t *testing.T) {
	t.Setenv("TURNSTILE_TEST_EXTRA", "inherited")
	code, stdout, stderr := runInProcess(t, context.Background(), "--key", "lock:report:daily", "--",
		"sh", "-c", `printf '%s|%s|%s' "$TURNSTILE_KEY" "$TURNSTILE_TOKEN" "$TURNSTILE_TEST_EXTRA"`)
	if code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
	}
	f := strings.Split(stdout, "|")
	if len(f) != 3 {
		t.Fatalf("child printed %q", stdout)
	}
	if f[0] != "lock:report:daily" {
		t.Errorf("TURNSTILE_KEY = %q", f[0])
	}
	if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
		t.Errorf("TURNSTILE_TOKEN = %q, want a positive decimal", f[1])
	}
	if f[2] != "inherited" {
		t.Errorf("parent environment not passed on: TURNSTILE_TEST_EXTRA = %q", f[2])
	}
}

func TestRunInProcessExitStatus(t *testing.T) {
	noExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"success", []string{"true"}, 0},
		{"exit code", []string{"sh", "-c", "exit 7"}, 7},
		{"exit code 255", []string{"sh", "-c", "exit 255"}, 255},
		{"killed by signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"not found", []string{"turnstile-no-such-command"}, exitNotFound},
		{"missing path", []string{"/nonexistent/turnstile-test"}, exitNotFound},
		{"not executable", []string{noExec}, exitCannotRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--key", "k:" + tt.name, "--"}, tt.argv...)
			code, _, stderr := runInProcess(t, context.Background(), args...)
			if code != tt.want {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.want, stderr)
			}
		})
	}
}

// Cancelling runCmd's context is what a signal to the process does: the
// command's process group gets SIGTERM, and its status comes back.
func TestRunInProcessCancelStopsCommandGroup(t *testing.T) {
	ctx, dir := cancelWhenReady(t)
	code, _, stderr := runInProcess(t, ctx, "--key", "k", "--",
		"sh", "-c", `trap 'echo term > "$DIR/term"; exit 5' TERM; sleep 30 & touch "$DIR/ready"; wait`)
	if code != 5 {
		t.Errorf("exit code %d, want the command's 5; stderr:\n%s", code, stderr)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the command did not get SIGTERM")
	}
}
