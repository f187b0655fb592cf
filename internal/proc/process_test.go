//go:build linux

package proc_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// TestProcessPauseResumeKill runs a sleep under a Process: Pause stops
// it, Resume continues it, Kill ends it and waits, and the controls of a
// process that is gone say so.
func TestProcessPauseResumeKill(t *testing.T) {
	var p proc.Process
	if p.PID() != 0 || p.Paused() || proc.Running(&p) || p.Kill() {
		t.Fatal("an empty Process reports a running server")
	}
	if err := p.Pause(); err != proc.ErrNotRunning {
		t.Fatalf("Pause of an empty Process = %v, want ErrNotRunning", err)
	}
	cmd := exec.Command("sleep", "60")
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "sleep", filepath.Join(t.TempDir(), "log"), 10*time.Second, time.Millisecond, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	proc.Started(&p, cmd, exited)
	t.Cleanup(func() { p.Kill() })
	pid := p.PID()
	if pid != cmd.Process.Pid || !proc.Running(&p) {
		t.Fatalf("PID = %d, want %d; Running = %v", pid, cmd.Process.Pid, proc.Running(&p))
	}

	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	waitState(t, pid, "T")
	if !p.Paused() || proc.Running(&p) {
		t.Fatalf("after Pause: Paused = %v, Running = %v", p.Paused(), proc.Running(&p))
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	waitState(t, pid, "S")
	if p.Paused() || !proc.Running(&p) {
		t.Fatalf("after Resume: Paused = %v, Running = %v", p.Paused(), proc.Running(&p))
	}

	// A paused process is killed too, and Kill returns once it has exited.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if !p.Kill() {
		t.Fatal("Kill found no process")
	}
	select {
	case <-exited:
	default:
		t.Fatal("Kill returned before the process exited")
	}
	if p.PID() != 0 || p.Paused() || p.Kill() {
		t.Fatalf("after Kill: PID = %d, Paused = %v", p.PID(), p.Paused())
	}
	if err := p.Resume(); err != proc.ErrNotRunning {
		t.Fatalf("Resume after Kill = %v, want ErrNotRunning", err)
	}
}

// TestKillTree kills a shell and the sleep it started: both are gone.
func TestKillTree(t *testing.T) {
	if err := proc.KillTree(0); err != proc.ErrNotRunning {
		t.Fatalf("KillTree(0) = %v, want ErrNotRunning", err)
	}
	cmd, child := shellWithChild(t)
	if err := proc.KillTree(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.String() != "signal: killed" {
		t.Fatalf("the shell ended with %v, want signal: killed", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's child %d outlived KillTree by 10 s", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting to be reaped counts as exited).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0] != "Z"
}

func TestPollAndRetry(t *testing.T) {
	calls := 0
	err := proc.Poll(10*time.Second, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
	want := errors.New("never")
	if err := proc.Poll(0, time.Millisecond, func() error { return want }); err != want {
		t.Fatalf("Poll past its timeout = %v, want f's error", err)
	}
	calls = 0
	if err := proc.Retry(4, 0, func() error { calls++; return want }); err != want || calls != 4 {
		t.Fatalf("Retry = %v after %d calls, want f's error after 4", err, calls)
	}
}

func TestPortsAndStartAll(t *testing.T) {
	var ports proc.Ports
	seen := map[int]bool{}
	for range 5 {
		p, err := ports.Free()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d picked twice", p)
		}
		seen[p] = true
	}
	bad := errors.New("bad member")
	err := proc.StartAll([]int{1, 2, 3}, func(i int) error {
		if i == 2 {
			return bad
		}
		return nil
	})
	if !errors.Is(err, bad) {
		t.Fatalf("StartAll = %v, want the failing member's error", err)
	}
	if err := proc.StartAll([]int{1, 2}, func(int) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestOnFreePortsAndRestart(t *testing.T) {
	var a, b int
	var tried [][2]int
	busy := errors.New("port taken")
	err := proc.OnFreePorts(3, func() error {
		tried = append(tried, [2]int{a, b})
		if len(tried) < 2 {
			return busy
		}
		return nil
	}, &a, &b)
	if err != nil || len(tried) != 2 {
		t.Fatalf("OnFreePorts = %v after %d starts, want nil after 2", err, len(tried))
	}
	for _, p := range tried {
		if p[0] == 0 || p[1] == 0 || p[0] == p[1] {
			t.Fatalf("OnFreePorts set ports %v, want two different ones", p)
		}
	}
	calls := 0
	if err := proc.OnFreePorts(2, func() error { calls++; return busy }); err != busy || calls != 2 {
		t.Fatalf("OnFreePorts = %v after %d starts, want start's error after 2", err, calls)
	}

	calls = 0
	err = proc.Restart("redis-server", 3, 0, func() error { calls++; return busy })
	if !errors.Is(err, busy) || err.Error() != "restart redis-server: port taken" || calls != 3 {
		t.Fatalf("Restart = %v after %d calls, want the restart of redis-server failing after 3", err, calls)
	}
	if err := proc.Restart("etcd", 3, 0, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// fakeServer is a server of a group for the group helpers' test.
type fakeServer struct {
	addr   string
	killed bool
}

func (s *fakeServer) Addr() string { return s.addr }
func (s *fakeServer) Kill()        { s.killed = true }

func TestGroupHelpers(t *testing.T) {
	servers := []*fakeServer{{addr: "127.0.0.1:1"}, {addr: "127.0.0.1:2"}}
	if got := proc.Addrs(servers); len(got) != 2 || got[0] != "127.0.0.1:1" || got[1] != "127.0.0.1:2" {
		t.Fatalf("Addrs = %v", got)
	}
	proc.KillAll(servers)
	if !servers[0].killed || !servers[1].killed {
		t.Fatal("KillAll left a server running")
	}
	if err := proc.WaitHealthy("test cluster", time.Second, time.Millisecond, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	sick := errors.New("member 1 is not healthy")
	err := proc.WaitHealthy("test cluster", 0, time.Millisecond, func() error { return sick })
	if !errors.Is(err, sick) || err.Error() != "test cluster not healthy within 0s: member 1 is not healthy" {
		t.Fatalf("WaitHealthy = %v", err)
	}
}
