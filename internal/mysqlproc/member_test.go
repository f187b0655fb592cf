package mysqlproc

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPauseResumeRestart(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	// In memory where /dev/shm exists: initialising a data directory on
	// a busy disk takes seconds.
	dir, err := os.MkdirTemp("/dev/shm", "turnstile-mysqlproc-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	s, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill(); s.Remove() })
	if _, err := s.Exec("CREATE TABLE turnstile.t (v int); INSERT INTO turnstile.t VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	// Paused, the server answers nothing; resumed, it answers again.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, s.bins["mariadb"], "--no-defaults", "--socket="+s.sock, "-uroot", "-e", "SELECT 1").CombinedOutput(); err == nil {
		t.Fatalf("a paused server answered: %s", out)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Exec("SELECT 1"); err != nil || out != "1" {
		t.Fatalf("after Resume: %q, %v", out, err)
	}

	// A crash and restart, even of a paused server, keeps the committed
	// row.
	pid := s.PID()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || s.PID() == 0 || s.Paused() {
		t.Fatalf("after Restart: pid %d (was %d), paused %v", s.PID(), pid, s.Paused())
	}
	if out, err := s.Exec("SELECT v FROM turnstile.t"); err != nil || out != "42" {
		t.Fatalf("after Restart: %q, %v", out, err)
	}
}
