package redisproc

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSentinelFailover: the Sentinels of a started group agree on its
// primary, a paused member answers nothing until resumed, and the
// Sentinels promote the replica, with the primary's data, once the
// primary is killed.
func TestSentinelFailover(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	start := time.Now()
	g, err := StartSentinel(t.TempDir(), 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	t.Logf("started in %v", time.Since(start))
	if got := len(g.SentinelAddrs()); got != 3 {
		t.Fatalf("%d sentinel addresses, want 3", got)
	}
	if !strings.HasPrefix(g.URL(), "redis+sentinel://") || !strings.HasSuffix(g.URL(), "/"+g.MasterSet()) {
		t.Fatalf("URL %q", g.URL())
	}
	p, err := g.Primary()
	if err != nil {
		t.Fatal(err)
	}
	if p != g.Nodes()[0] {
		t.Fatalf("primary %s, want the first node %s", p.Addr(), g.Nodes()[0].Addr())
	}
	if _, err := p.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	replica := g.Nodes()[1]
	waitFor(t, func() bool { v, err := replica.Do("GET", "k"); return err == nil && v == "v" })

	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	if answers(replica, 300*time.Millisecond) {
		t.Fatal("a paused replica answered PING")
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { v, err := replica.Do("PING"); return err == nil && v == "PONG" })

	start = time.Now()
	p.Kill()
	np, err := g.WaitFailover(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(start))
	if np != replica {
		t.Fatalf("promoted %s, want the replica %s", np.Addr(), replica.Addr())
	}
	if v, err := np.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("the new primary has k = %q, %v; want v", v, err)
	}
	if _, err := np.Do("SET", "k2", "v"); err != nil {
		t.Fatalf("the new primary refuses a write: %v", err)
	}
	if _, err := g.WaitFailover(100 * time.Millisecond); err == nil {
		t.Fatal("WaitFailover returned without a second failover")
	}
	// The promoted node keeps its role across a crash and restart: the
	// Sentinels wrote it into its configuration file.
	np.Kill()
	if err := np.Restart(); err != nil {
		t.Fatal(err)
	}
	if info, err := np.Do("INFO", "replication"); err != nil || !strings.Contains(info, "role:master") {
		t.Fatalf("the promoted primary restarted as %q, %v; want role:master", info, err)
	}
}

// answers reports whether s answers a PING within d.
func answers(s *Server, d time.Duration) bool {
	conn, err := net.DialTimeout("tcp", s.Addr(), d)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(d))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartSentinelRefusesTooFewSentinels(t *testing.T) {
	if _, err := StartSentinel(t.TempDir(), 1, 1); err == nil || !strings.Contains(err.Error(), "at least 2 sentinels") {
		t.Fatalf("err = %v, want one naming at least 2 sentinels", err)
	}
}

// skewOf is how far s's TIME is ahead of our clock, give or take the
// call's duration.
func skewOf(t *testing.T, s *Server) time.Duration {
	t.Helper()
	before := time.Now()
	reply, err := s.Call("TIME")
	parts, _ := reply.([]any)
	if err != nil || len(parts) != 2 {
		t.Fatalf("TIME = %#v, %v", reply, err)
	}
	sec, _ := parts[0].(string)
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		t.Fatalf("TIME = %#v", reply)
	}
	return time.Unix(n, 0).Sub(before)
}

// TestSentinelNodeClocks: with WithNodeClocks each data node runs under
// a clock of its own and the Sentinels under none; a jump of the
// primary's clock moves its TIME only, and expires a key whose TTL it
// passes.
func TestSentinelNodeClocks(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	g, err := StartSentinelWith(t.TempDir(), 1, 2, WithNodeClocks())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	primary, replica := g.Nodes()[0], g.Nodes()[1]
	if primary.Clock() == nil || replica.Clock() == nil || primary.Clock() == replica.Clock() {
		t.Fatalf("the data nodes' clocks: %p and %p, want two of their own", primary.Clock(), replica.Clock())
	}
	for _, s := range g.Sentinels() {
		if s.Clock() != nil {
			t.Fatalf("sentinel %s runs under a wrong clock", s.Addr())
		}
	}
	if _, err := primary.Do("SET", "k", "v", "PX", "600000"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Clock().Jump(time.Hour); err != nil {
		t.Fatal(err)
	}
	near := func(s *Server, want time.Duration) {
		t.Helper()
		if got := skewOf(t, s); got < want-time.Minute || got > want+time.Minute {
			t.Fatalf("node %s's clock is %v ahead, want %v", s.Addr(), got, want)
		}
	}
	near(primary, time.Hour)
	near(replica, 0)
	if v, err := primary.Call("GET", "k"); err != nil || v != nil {
		t.Fatalf("GET k on the primary after a jump past its TTL = %#v, %v; want nil", v, err)
	}
}
