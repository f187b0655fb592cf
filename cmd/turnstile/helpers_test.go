//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// proc is a turnstile process started by a test.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	done    chan struct{}
	code    int
}

// result is how a turnstile process ended.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration // from start to exit
}

// startTurnstile starts the built binary with args, the test's
// environment and env on top. The process is stopped when the test ends.
func startTurnstile(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProcess(t, env, binary, args...)
}

// startProcess is startTurnstile for a program that execs turnstile.
func startProcess(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	// A -race binary sleeps 1 s on exit unless told not to.
	p.cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// A command left running after turnstile died keeps the output pipes
	// open; do not wait for it.
	p.cmd.WaitDelay = time.Second
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		// SIGTERM first: turnstile passes it on, so the command stops too.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and fails the test after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("turnstile %q still running after %v", p.cmd.Args[1:], timeout)
	}
	return result{code: p.code, stdout: p.stdout.String(), stderr: p.stderr.String(), elapsed: time.Since(p.started)}
}

// runTurnstile runs the binary to its end. The bound only catches a hang:
// the whole demo takes over a minute when the machine is busy with other
// tests and other work.
func runTurnstile(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return startTurnstile(t, env, args...).wait(t, runBound)
}

// runBound is how long runTurnstile lets a command run before it is taken
// for hung.
const runBound = 4 * time.Minute

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", filepath.Base(path), timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// redisDir starts a redis-server for the test and makes a temporary
// directory; env points turnstile at the server ($TURNSTILE_BACKEND) and
// the command's shell at the directory ($DIR).
func redisDir(t *testing.T) (srv *testserver.Redis, dir string, env []string) {
	t.Helper()
	srv = testserver.StartRedis(t)
	dir = t.TempDir()
	return srv, dir, []string{"TURNSTILE_BACKEND=" + srv.URL(), "DIR=" + dir}
}
