package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHistoryKeepsServerLogs: with a history directory, a cell leaves
// what its servers and the proxies before them logged beside its events — across a restart of the
// server, which must add to its log rather than start it anew — and the
// log of a later cell starts where the cell before it ended.
func TestHistoryKeepsServerLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hist := t.TempDir()
	s := settings{Stores: []string{"postgres"}, Faults: []string{"reset", "member-restart"}, Duration: 2 * time.Second, Workers: 2,
		TTL: 500 * time.Millisecond, Hold: 2 * time.Millisecond, Dir: t.TempDir(), Log: t.Output(), History: hist}
	restarts := 0
	if err := run(ctx, s, func(c cell) {
		if c.Error != "" {
			t.Errorf("%s × %s could not run: %s", c.Store, c.Fault, c.Error)
		}
		if c.Fault == "member-restart" {
			restarts = c.Faults
		}
	}); err != nil {
		t.Fatal(err)
	}
	read := func(fault string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(hist, "postgres-"+fault+".postgres.log"))
		if err != nil {
			entries, _ := os.ReadDir(hist)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("the server's log of the %s cell was not kept: %v (the history holds %q)", fault, err, names)
		}
		return string(b)
	}
	reset, restart := read("reset"), read("member-restart")
	// The workers' sessions of each cell are in its log.
	for fault, log := range map[string]string{"reset": reset, "member-restart": restart} {
		if !strings.Contains(log, "connection received") {
			t.Errorf("the %s cell's server log records no connection:\n%s", fault, log)
		}
	}
	// The proxies between the workers and the server log the connections
	// they accepted.
	if b, err := os.ReadFile(filepath.Join(hist, "postgres-reset.proxies.log")); err != nil || !strings.Contains(string(b), "Accepted client") {
		t.Errorf("the reset cell's proxy log was not kept, or records no connection: %v\n%s", err, b)
	}
	// Every crashed postmaster's successor says it recovers: a log
	// started anew at each restart would keep the last one only.
	if n := strings.Count(restart, "was interrupted"); restarts < 2 || n != restarts {
		t.Errorf("the member-restart cell restarted the server %d times, and its log tells of %d restarts:\n%s", restarts, n, restart)
	}
	if strings.Contains(reset, "was interrupted") {
		t.Errorf("the reset cell's server log holds the restart of the next cell:\n%s", reset)
	}
}

// TestKeepLogsFromMark: a log shorter than its mark was started anew and
// is kept whole; otherwise only what follows the mark is kept.
func TestKeepLogsFromMark(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "server.log")
	if err := os.WriteFile(src, []byte("before\nduring\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mark int64
		want string
	}{{7, "during\n"}, {0, "before\nduring\n"}, {100, "before\nduring\n"}} {
		dst := filepath.Join(dir, "kept.log")
		if err := copyFrom(src, tc.mark, dst); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(dst); string(b) != tc.want {
			t.Errorf("from %d: kept %q, want %q", tc.mark, b, tc.want)
		}
	}
	if got := serverLogPath("h", "zookeeper", "member-restart", "server 1"); got != filepath.Join("h", "zookeeper-member-restart.server-1.log") {
		t.Errorf("serverLogPath = %q", got)
	}
}
