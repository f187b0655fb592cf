//go:build unix

package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestRunZooKeeperDown: with no ZooKeeper server to reach, "run
// --no-wait" gives up after the URL's dial timeout (5 s by default)
// and exits 69 naming the server, without a --wait to bound it; the
// command never runs.
func TestRunZooKeeperDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	// The default dial timeout, plus room for a -race binary's start and
	// a loaded machine.
	const bound = 5*time.Second + 25*time.Second
	r := startTurnstile(t, nil, "run", "--backend", "zookeeper://"+addr, "--key", "down", "--no-wait", "--", "echo", "ran").wait(t, bound)
	t.Logf("exit %d after %v; stderr: %s", r.code, r.elapsed, r.stderr)
	if r.code != exitUnavailable {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	if !strings.Contains(r.stderr, addr) {
		t.Fatalf("stderr does not name the server %s:\n%s", addr, r.stderr)
	}
	if strings.Contains(r.stdout, "ran") {
		t.Fatal("the command ran without the lock")
	}
}
