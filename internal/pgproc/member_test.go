package pgproc

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// psql runs sql with the psql client and returns its output, or an error
// after timeout.
func psql(s *Server, timeout time.Duration, sql string) (string, error) {
	bin, err := lookPath("psql")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres",
		"-d", "postgres", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestPauseResumeRestart(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	if _, err := psql(s, 30*time.Second, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	// Paused, the server answers nothing; resumed, it answers again.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if out, err := psql(s, time.Second, "SELECT 1"); err == nil {
		t.Fatalf("a paused server answered: %s", out)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if out, err := psql(s, 30*time.Second, "SELECT 1"); err != nil || out != "1" {
		t.Fatalf("after Resume: %q, %v", out, err)
	}

	// A crash and restart keeps the committed row, under a new postmaster
	// on the same port, even from a paused server.
	pid, addr := s.PID(), s.Addr()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || s.PID() == 0 || s.Addr() != addr || s.Paused() {
		t.Fatalf("after Restart: pid %d (was %d), %s (was %s), paused %v", s.PID(), pid, s.Addr(), addr, s.Paused())
	}
	if out, err := psql(s, 30*time.Second, "SELECT v FROM t"); err != nil || out != "42" {
		t.Fatalf("after Restart: %q, %v", out, err)
	}
}
