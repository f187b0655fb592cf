package redisproc

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proctest"
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

// sourceLinks are TCP forwarders in front of data nodes that can cut a
// node off from the other members — connections from any source but
// 127.0.0.1 — while clients still reach it. A member's connection is
// tracked under the node it reaches; a client's is not.
type sourceLinks struct {
	proctest.Links[int]
	cut     int            // the node cut off, or -1
	sources map[string]int // connections forwarded, by source address
}

func (l *sourceLinks) link(node int, addr string) (string, error) {
	return l.Listen(func(c net.Conn) {
		src, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		member := src != "127.0.0.1"
		l.Forward(c, addr, nil, func() (int, bool, bool) {
			if member && l.cut == node {
				return 0, false, false
			}
			l.sources[src]++
			return node, member, true
		})
	})
}

func (l *sourceLinks) isolate(node int) {
	l.Lock()
	defer l.Unlock()
	l.cut = node
	l.Drop(func(n int) bool { return n == node })
}

func (l *sourceLinks) seen(src string) int {
	l.Lock()
	defer l.Unlock()
	return l.sources[src]
}

// TestSentinelLinked: the members of a linked group reach the data nodes
// only through their links, from their own source addresses, and the
// Sentinels name the primary at its link: cutting the primary's link to
// the members makes the Sentinels promote the replica while the old
// primary still answers clients through its link.
func TestSentinelLinked(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	links := &sourceLinks{cut: -1, sources: map[string]int{}}
	t.Cleanup(links.Close)
	g, err := StartSentinelWith(t.TempDir(), 1, 3, WithNodeLinks(links.link))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill) // runs before links.Close
	old, replica := g.Nodes()[0], g.Nodes()[1]
	addr, err := g.PrimaryAddr()
	if err != nil {
		t.Fatal(err)
	}
	if addr != g.PeerAddr(old) || addr == old.Addr() {
		t.Fatalf("the sentinels name %s as the primary, want its link %s", addr, g.PeerAddr(old))
	}
	if info, err := replica.Do("INFO", "replication"); err != nil || !strings.Contains(info, "master_port:"+addr[strings.LastIndex(addr, ":")+1:]) {
		t.Fatalf("the replica does not replicate through the link %s: %v %s", addr, err, info)
	}
	if links.seen(SentinelSource) == 0 || links.seen(NodeSource(1)) == 0 {
		t.Fatalf("links saw no connection from the sentinels (%s) or the replica (%s)", SentinelSource, NodeSource(1))
	}

	links.isolate(0)
	np, err := g.WaitFailover(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if np != replica {
		t.Fatalf("promoted %s, want the replica", np.Addr())
	}
	// A client still reaches the old primary, which still takes writes.
	c, err := net.DialTimeout("tcp", g.PeerAddr(old), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "SET k v\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("the cut-off primary answered %q, %v to a client's write; want +OK", line, err)
	}
}

func TestStartSentinelWithRefusesABadLink(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	if _, err := StartSentinelWith(t.TempDir(), 1, 3, WithNodeLinks(nil)); err == nil {
		t.Error("no error without a link")
	}
	_, err := StartSentinelWith(t.TempDir(), 1, 3, WithNodeLinks(func(int, string) (string, error) { return "nowhere", nil }))
	if err == nil || !strings.Contains(err.Error(), "link to data node 0") {
		t.Errorf("err = %v, want one naming the link", err)
	}
}
