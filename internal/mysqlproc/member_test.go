package mysqlproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memDir is a temporary directory in memory where /dev/shm exists:
// initialising a data directory on a busy disk takes seconds.
func memDir(t *testing.T) string { return proctest.MemDir(t, "turnstile-mysqlproc-") }

func TestPauseResumeRestart(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	dir := memDir(t)
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

// serverSkew is how far the server's clock, read by NOW(6) and
// SYSDATE(6) in a new session, is ahead of ours, give or take the
// query's duration.
func serverSkew(t *testing.T, s *Server) (now, sysdate time.Duration) {
	t.Helper()
	before := time.Now()
	out, err := s.Exec("SELECT FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000), FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000)")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("read the server's clock: %q", out)
	}
	var skews [2]time.Duration
	for i, v := range f {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("read the server's clock: %q", out)
		}
		skews[i] = time.UnixMicro(us).Sub(before)
	}
	return skews[0], skews[1]
}

// near fails the test unless NOW(6) and SYSDATE(6) are want ahead within
// a minute: far less than the jumps, far more than a query on a busy
// machine takes.
func near(t *testing.T, what string, s *Server, want time.Duration) {
	t.Helper()
	now, sysdate := serverSkew(t, s)
	for _, got := range []time.Duration{now, sysdate} {
		if got < want-time.Minute || got > want+time.Minute {
			t.Fatalf("%s: the server's clock is %v (NOW) and %v (SYSDATE) ahead, want %v", what, now, sysdate, want)
		}
	}
}

// TestClockMovesServerTime: a server started with a Clock reads the
// clock's time, in new sessions and in one open across the jump, and
// again after a restart.
func TestClockMovesServerTime(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	dir := memDir(t)
	s, err := StartWith(dir, Options{Clock: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill(); s.Remove() })
	clock := s.Clock()
	if clock == nil {
		t.Fatal("Clock() is nil for a server started with Options.Clock")
	}
	near(t, "before any jump", s, 0)

	// A session open before the jump waits (at most 60 s by a counter,
	// not the clock) until its SYSDATE(6) has moved more than 30 minutes
	// from when it began, and returns the move. (The mariadb client sends
	// the block as one statement after DELIMITER.)
	const wait = `DELIMITER //
BEGIN NOT ATOMIC
	DECLARE t0 DATETIME(6) DEFAULT SYSDATE(6);
	DECLARE i INT DEFAULT 0;
	WHILE i < 1200 AND ABS(TIMESTAMPDIFF(SECOND, t0, SYSDATE(6))) <= 1800 DO
		DO SLEEP(0.05);
		SET i = i + 1;
	END WHILE;
	SELECT CONCAT('moved ', TIMESTAMPDIFF(SECOND, t0, SYSDATE(6)));
END //`
	// Jump once the session runs the loop.
	out, err := proctest.JumpDuring(t, clock, time.Hour, func() (string, error) { return s.Exec(wait) }, func() bool {
		out, err := s.Exec("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'DO SLEEP(0.05)'")
		return err == nil && out == "1"
	})
	var moved int
	if _, after, ok := strings.Cut(out, "moved "); ok {
		moved, _ = strconv.Atoi(strings.TrimSpace(after))
	}
	if err != nil || moved < 3600-60 || moved > 3600+60 {
		t.Fatalf("the open session's clock after a jump of 1h: %q, %v; want a move of about 3600 s", out, err)
	}
	near(t, "after a jump of 1h", s, time.Hour)

	if err := clock.Jump(-2 * time.Hour); err != nil {
		t.Fatal(err)
	}
	near(t, "after a jump of -2h", s, -time.Hour)

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	near(t, "after Restart", s, -time.Hour)
}

// TestServersKeepTheirTemporaryFiles: a server starting removes the
// temporary files ("#sql…") it finds in its temporary directory, left
// by an earlier run of its own. Each server has one of its own, so that
// one starting (or its data directory being initialised) never removes
// the temporary tables of another that runs, or initialises, beside it:
// mariadb-install-db then failed with "Error on delete of
// '/tmp/#sql-temptable-…'".
func TestServersKeepTheirTemporaryFiles(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	a, err := Start(memDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Kill(); a.Remove() })
	tmp, err := a.Exec("SELECT @@tmpdir")
	if err != nil {
		t.Fatal(err)
	}
	tmp = strings.TrimSpace(tmp)
	if tmp == os.TempDir() || !strings.HasPrefix(tmp, filepath.Dir(a.sock)) {
		t.Fatalf("server's tmpdir %q, want a directory of its own under %s", tmp, filepath.Dir(a.sock))
	}
	probe := filepath.Join(tmp, "#sql-turnstile-probe.MAI")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Start(memDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Kill(); b.Remove() })
	if _, err := os.Stat(probe); err != nil {
		t.Fatalf("a temporary file of the first server after the second started: %v", err)
	}
}
