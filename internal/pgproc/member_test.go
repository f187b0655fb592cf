package pgproc

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/proctest"
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

// serverSkew is how far the server's clock_timestamp() is ahead of ours,
// read by a new session (a newly forked backend), give or take the
// query's duration.
func serverSkew(t *testing.T, s *Server) time.Duration {
	t.Helper()
	before := time.Now()
	out, err := psql(s, 30*time.Second, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
	if err != nil {
		t.Fatalf("read the server's clock: %v: %s", err, out)
	}
	us, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("read the server's clock: %q", out)
	}
	return time.UnixMicro(us).Sub(before)
}

// near fails the test unless got is want within a minute: far less than
// the jumps, far more than a query on a busy machine takes.
func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got < want-time.Minute || got > want+time.Minute {
		t.Fatalf("%s: the server's clock is %v ahead, want %v", what, got, want)
	}
}

// TestClockMovesServerTime: a server started with a Clock reads the
// clock's time in new sessions and in a session that was open before the
// jump (a backend forked earlier), and again after a restart.
func TestClockMovesServerTime(t *testing.T) {
	s, err := StartWith(Options{Clock: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	clock := s.Clock()
	if clock == nil {
		t.Fatal("Clock() is nil for a server started with Options.Clock")
	}
	near(t, "before any jump", serverSkew(t, s), 0)

	// A backend of a session open before the jump: it waits (at most
	// 60 s by a counter, not the clock) until its clock_timestamp() has
	// moved more than 30 minutes from when it began, and returns the move.
	// It names itself once it has read its first time, so that the jump
	// comes after that: the block shows as active before it reads it.
	const wait = `DO $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
	PERFORM set_config('application_name', 'clock-wait', false);
	FOR i IN 1..1200 LOOP
		PERFORM pg_sleep(0.05);
		IF abs(extract(epoch FROM clock_timestamp() - t0)) > 1800 THEN
			RAISE NOTICE 'moved % s', round(extract(epoch FROM clock_timestamp() - t0));
			RETURN;
		END IF;
	END LOOP;
	RAISE EXCEPTION 'the clock did not move';
END $$`
	// Jump once the session runs the block.
	out, err := proctest.JumpDuring(t, clock, time.Hour, func() (string, error) { return psql(s, 2*time.Minute, wait) }, func() bool {
		out, err := psql(s, 30*time.Second, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'clock-wait' AND state = 'active'")
		return err == nil && out == "1"
	})
	var moved int
	if _, after, ok := strings.Cut(out, "moved "); ok {
		num, _, _ := strings.Cut(after, " ")
		moved, _ = strconv.Atoi(num)
	}
	if err != nil || moved < 3600-60 || moved > 3600+60 {
		t.Fatalf("the open session's clock after a jump of 1h: %q, %v; want a move of about 3600 s", out, err)
	}
	near(t, "after a jump of 1h", serverSkew(t, s), time.Hour)

	if err := clock.Jump(-2 * time.Hour); err != nil {
		t.Fatal(err)
	}
	near(t, "after a jump of -2h", serverSkew(t, s), -time.Hour)

	// The restarted server runs under the same clock.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	near(t, "after Restart", serverSkew(t, s), -time.Hour)
}
