//go:build unix

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// Ctrl-C during a cell stops it, releases its locks and prints the table
// of the cells measured before it, with the interrupted one under
// problems.
func TestBenchInterrupt(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	cmd := exec.Command(binary, "bench", "--url", srv.URL(), "--duration", "1s", "--only", "uncontended/c=1$|contended-1")
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	// Read stderr until the second cell has started, then interrupt.
	var stderr strings.Builder
	rd := bufio.NewReader(errPipe)
	for !strings.Contains(stderr.String(), "contended-1/c=64") {
		b, err := rd.ReadByte()
		if err != nil {
			t.Fatalf("stderr ended before the second cell started: %v\n%s", err, stderr.String())
		}
		stderr.WriteByte(b)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := rd.ReadString(0) // to the end: Wait closes the pipe
	stderr.WriteString(rest)
	err = cmd.Wait()
	close(done)
	code := cmd.ProcessState.ExitCode()
	if code != 128+int(syscall.SIGINT) {
		t.Errorf("exit code %d (%v), want %d; stderr:\n%s", code, err, 128+int(syscall.SIGINT), stderr.String())
	}
	if !strings.Contains(stderr.String(), "received SIGINT; stopped after 1 of 2 cells") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	tb := parseBenchTable(t, stdout.String())
	if v := tb.number(t, "uncontended/c=1", "acq/s"); v <= 0 {
		t.Errorf("uncontended/c=1: %v acq/s", v)
	}
	if !strings.Contains(stdout.String(), "contended-1/c=64: interrupted") {
		t.Errorf("the table does not list the interrupted cell under problems:\n%s", stdout.String())
	}
	if locks := leftoverLocks(t, srv.Addr(), 0); len(locks) > 0 {
		t.Errorf("locks left behind: %q", locks)
	}
}
