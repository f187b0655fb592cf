package redisproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppendOnlyKeepsKeysAcrossKill: a server with an append-only file
// fsynced on every write comes back from SIGKILL with what it
// acknowledged, on the same port and files; keys keep their absolute
// expiry times, so one whose time ran out while it was down is gone.
func TestAppendOnlyKeepsKeysAcrossKill(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	dir := t.TempDir()
	s, err := StartWith(dir, WithAppendOnly(FsyncAlways))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	if got := s.AppendOnly(); got != FsyncAlways {
		t.Fatalf("AppendOnly() = %q, want %q", got, FsyncAlways)
	}
	for k, want := range map[string]string{"appendonly": "yes", "appendfsync": "always"} {
		if reply, err := s.Call("CONFIG", "GET", k); err != nil || !sameReply(reply, []any{k, want}) {
			t.Fatalf("CONFIG GET %s = %#v, %v; want %s", k, reply, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "appendonlydir", "appendonly.aof.manifest")); err != nil {
		t.Fatalf("no append-only file in the server's directory: %v", err)
	}

	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do("SET", "long", "v", "PX", "600000"); err != nil {
		t.Fatal(err)
	}
	written := time.Now() // the server set both expiry times before this
	if _, err := s.Do("SET", "short", "v", "PX", "1500"); err != nil {
		t.Fatal(err)
	}
	shortSet := time.Now()
	if v, err := s.Do("GET", "short"); err != nil || v != "v" {
		t.Fatalf("GET short before the kill = %q, %v", v, err)
	}
	addr, pid := s.Addr(), s.PID()

	s.Kill()
	// Down until short's time has run out.
	time.Sleep(time.Until(shortSet.Add(1500*time.Millisecond + 200*time.Millisecond)))
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr || s.PID() == pid {
		t.Fatalf("restarted at %s with PID %d, want %s and a PID other than %d", s.Addr(), s.PID(), addr, pid)
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k after the restart = %q, %v; want v", v, err)
	}
	if reply, err := s.Call("GET", "short"); err != nil || reply != nil {
		t.Fatalf("GET short after the restart = %#v, %v; want nil (its time ran out while the server was down)", reply, err)
	}
	asked := time.Now() // the server answers PTTL after this
	reply, err := s.Call("PTTL", "long")
	pttl, _ := reply.(int64)
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL long after the restart = %#v, %v", reply, err)
	}
	// The expiry time is absolute: the downtime counted. (50 ms of slack
	// for the server's wall clock against this process's monotonic one.)
	if most := 600000 - asked.Sub(written).Milliseconds() + 50; pttl > most {
		t.Fatalf("PTTL long after the restart = %d ms, want at most %d: the time the server was down did not count", pttl, most)
	}
}

// TestRestartWithoutPersistenceForgets: Start's server, without an
// append-only file, comes back from SIGKILL empty.
func TestRestartWithoutPersistenceForgets(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	dir := t.TempDir()
	s, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	if got := s.AppendOnly(); got != "" {
		t.Fatalf("AppendOnly() = %q, want none", got)
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if reply, err := s.Call("GET", "k"); err != nil || reply != nil {
		t.Fatalf("GET k after the restart = %#v, %v; want nil", reply, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "appendonlydir")); !os.IsNotExist(err) {
		t.Fatalf("an append-only directory without WithAppendOnly: %v", err)
	}
}

func TestWithAppendOnlyRefusesUnknownPolicy(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []AppendFsync{"sometimes", "ALWAYS", "always "} {
		s, err := StartWith(dir, WithAppendOnly(p))
		if err == nil {
			s.Kill()
			t.Fatalf("WithAppendOnly(%q): no error", p)
		}
		if !strings.Contains(err.Error(), "appendfsync policy") || !strings.Contains(err.Error(), `"everysec"`) {
			t.Errorf("WithAppendOnly(%q): error %q names neither the setting nor the policies", p, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused start left files: %v", entries)
	}
}

func sameReply(got any, want []any) bool {
	a, ok := got.([]any)
	if !ok || len(a) != len(want) {
		return false
	}
	for i := range a {
		if a[i] != want[i] {
			return false
		}
	}
	return true
}
