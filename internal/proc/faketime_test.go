package proc_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverTime reads redis-server's TIME, in the server's clock.
func serverTime(t *testing.T, s *redisproc.Server) time.Time {
	t.Helper()
	reply, err := s.Call("TIME")
	if err != nil {
		t.Fatal(err)
	}
	parts, ok := reply.([]any)
	if !ok || len(parts) != 2 {
		t.Fatalf("TIME: %#v", reply)
	}
	sec, err1 := strconv.ParseInt(parts[0].(string), 10, 64)
	usec, err2 := strconv.ParseInt(parts[1].(string), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME: %#v", reply)
	}
	return time.Unix(sec, usec*1000)
}

// skew is how far the server's clock is ahead of ours, read between two
// readings of ours so that the call's own duration is no error.
func skew(t *testing.T, s *redisproc.Server) (lo, hi time.Duration) {
	t.Helper()
	before := time.Now()
	st := serverTime(t, s)
	after := time.Now()
	// The server's TIME lies in [before, after] shifted by its offset,
	// so the offset lies in [st-after, st-before] (TIME is in µs).
	return st.Sub(after) - time.Millisecond, st.Sub(before) + time.Millisecond
}

func TestClockShiftsRedisTime(t *testing.T) {
	dir := t.TempDir()
	clock, err := proc.NewClock(filepath.Join(dir, "offset"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisproc.StartWith(dir, redisproc.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	pid := s.PID()

	check := func(want time.Duration) {
		t.Helper()
		lo, hi := skew(t, s)
		if want < lo || want > hi {
			t.Fatalf("server clock is %v..%v ahead, want %v", lo, hi, want)
		}
	}
	check(0)
	if err := clock.Jump(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	check(30 * time.Second)
	if err := clock.Jump(-90 * time.Second); err != nil {
		t.Fatal(err)
	}
	check(-60 * time.Second)
	if clock.Offset() != -60*time.Second {
		t.Fatalf("Offset = %v, want -1m", clock.Offset())
	}

	// A key's TTL runs by the server's wall clock: a jump past it expires
	// the key at once.
	if _, err := s.Call("SET", "k", "v", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	if err := clock.Set(time.Hour); err != nil {
		t.Fatal(err)
	}
	check(time.Hour)
	if v, err := s.Call("GET", "k"); err != nil || v != nil {
		t.Fatalf("GET k after a jump past its TTL = %#v, %v; want nil", v, err)
	}
	if s.PID() != pid {
		t.Fatalf("the server was restarted: pid %d, was %d", s.PID(), pid)
	}
}
