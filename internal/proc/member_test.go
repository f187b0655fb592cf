//go:build linux

package proc_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// state is the state letter of process pid in /proc (T: stopped).
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// TestPauseStopsTheTree pauses a process and the child it started (as a
// postmaster's backends), and resumes both.
func TestPauseStopsTheTree(t *testing.T) {
	cmd, child := shellWithChild(t)
	if err := proc.Pause(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	waitState(t, cmd.Process.Pid, "T")
	waitState(t, child, "T")
	if err := proc.Resume(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	waitState(t, cmd.Process.Pid, "S")
	waitState(t, child, "S")

	if err := proc.Pause(0); err != proc.ErrNotRunning {
		t.Fatalf("Pause(0) = %v, want ErrNotRunning", err)
	}
}

// shellWithChild starts a shell that starts a sleep and waits for it,
// and returns the shell and the sleep's pid; both are killed at the
// test's end.
func shellWithChild(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	proc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var line [32]byte
	n, _ := out.Read(line[:])
	child, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", line[:n], err)
	}
	t.Cleanup(func() { _ = exec.Command("kill", "-9", strconv.Itoa(child)).Run() })
	return cmd, child
}

func waitState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for state(t, pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is in state %s, want %s", pid, state(t, pid), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
