package redisproc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clusterClient sends key commands to a cluster and follows its
// redirections (MOVED, ASK) as a cluster client does.
type clusterClient struct {
	c    *Cluster
	mu   sync.Mutex
	last *Server // where the last command went
}

func (cc *clusterClient) do(args ...string) (any, error) {
	cc.mu.Lock()
	node := cc.last
	cc.mu.Unlock()
	if node == nil || !node.running() {
		for _, s := range cc.c.nodes {
			if s.running() {
				node = s
				break
			}
		}
	}
	asking := false
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cmds := [][]string{args}
		if asking {
			cmds = [][]string{{"ASKING"}, args}
		}
		replies, err := node.exchange(cmds)
		if err != nil {
			return nil, err
		}
		reply := replies[len(replies)-1]
		e, isErr := reply.(replyError)
		if !isErr {
			if !asking {
				cc.mu.Lock()
				cc.last = node
				cc.mu.Unlock()
			}
			return reply, nil
		}
		f := strings.Fields(string(e))
		switch {
		case len(f) == 3 && (f[0] == "MOVED" || f[0] == "ASK"):
			next := cc.c.byAddr(f[2])
			if next == nil {
				return nil, fmt.Errorf("redirected to unknown node %s", f[2])
			}
			node, asking = next, f[0] == "ASK"
		case len(f) > 0 && (f[0] == "TRYAGAIN" || f[0] == "CLUSTERDOWN"):
			time.Sleep(20 * time.Millisecond)
		default:
			return nil, e
		}
	}
	return nil, errors.New("too many redirections")
}

func TestClusterMigrateSlotAndFailover(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	c, err := StartClusterWith(t.TempDir(), 3, WithReplicas(1), WithClusterClocks())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	if len(c.Nodes()) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes()))
	}
	primaries, err := c.Primaries()
	if err != nil || len(primaries) != 3 {
		t.Fatalf("Primaries = %d, %v; want 3", len(primaries), err)
	}
	replicas := map[*Server]bool{}
	for _, p := range primaries {
		r, err := c.ReplicaOf(p)
		if err != nil {
			t.Fatal(err)
		}
		if r == p || replicas[r] {
			t.Fatalf("replica %s of %s: not a replica of its own", r.Addr(), p.Addr())
		}
		replicas[r] = true
	}

	// Each node has a clock of its own: a replica's jump moves its TIME
	// only. (A replica's, as a node's jump makes it suspect the others
	// failed for a moment, and only masters' suspicions count.)
	jumper := primaries[0]
	for r := range replicas {
		jumper = r
		break
	}
	if err := jumper.Clock().Jump(time.Hour); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Server{primaries[0], jumper} {
		want := time.Duration(i) * time.Hour
		reply, err := s.Call("TIME")
		parts, _ := reply.([]any)
		if err != nil || len(parts) != 2 {
			t.Fatalf("TIME = %#v, %v", reply, err)
		}
		sec, _ := strconv.ParseInt(parts[0].(string), 10, 64)
		if skew := time.Until(time.Unix(sec, 0)); skew < want-time.Minute || skew > want+time.Minute {
			t.Fatalf("node %s's clock is %v ahead, want %v", s.Addr(), skew, want)
		}
	}
	if err := jumper.Clock().Set(0); err != nil {
		t.Fatal(err)
	}

	cc := &clusterClient{c: c}
	n, err := c.Do("CLUSTER", "KEYSLOT", "{m}")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.Atoi(n)
	slot := uint16(v)
	const before = 250 // over two MIGRATE batches
	for i := range before {
		if _, err := cc.do("SET", "{m}:"+strconv.Itoa(i), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	from, err := c.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	var to *Server
	for _, p := range primaries {
		if p != from {
			to = p
			break
		}
	}

	// A client keeps writing keys of the slot while it moves: each write
	// lands, on the old owner, or on the new one after an ASK or MOVED.
	var written atomic.Int64
	stop := make(chan struct{})
	writerErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerErr <- nil
				return
			default:
			}
			if _, err := cc.do("SET", "{m}:w"+strconv.Itoa(i), "w"); err != nil {
				writerErr <- err
				return
			}
			written.Add(1)
		}
	}()
	err = c.MigrateSlot(slot, to)
	close(stop)
	if werr := <-writerErr; werr != nil {
		t.Fatalf("a write during the migration: %v", werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if owner, err := c.Owner(slot); err != nil || owner != to {
		t.Fatalf("slot %d served by %v (%v), want %s", slot, owner, err, to.Addr())
	}
	if n, err := from.Call("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(int(slot))); err != nil || n != int64(0) {
		t.Fatalf("old owner still holds %v keys of the slot (%v)", n, err)
	}
	check := func(stage string) {
		t.Helper()
		for i := range before {
			got, err := cc.do("GET", "{m}:"+strconv.Itoa(i))
			if err != nil || got != strconv.Itoa(i) {
				t.Fatalf("%s: GET {m}:%d = %#v, %v", stage, i, got, err)
			}
		}
		for i := range int(written.Load()) {
			if got, err := cc.do("GET", "{m}:w"+strconv.Itoa(i)); err != nil || got != "w" {
				t.Fatalf("%s: GET {m}:w%d = %#v, %v", stage, i, got, err)
			}
		}
	}
	check("after the migration")
	t.Logf("%d keys written during the migration", written.Load())

	// The new owner crashes once its replica has every key: the replica
	// takes over the slot with them, and takes writes.
	want, err := c.ReplicaOf(to)
	if err != nil {
		t.Fatal(err)
	}
	// (WAIT would not say: it waits for its own connection's writes, and
	// the keys came over others.)
	keys, err := to.Call("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(int(slot)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := want.Call("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(int(slot)))
		if err == nil && n == keys {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica holds %v keys of the slot (%v), its master %v", n, err, keys)
		}
	}
	promoted, err := c.Failover(to)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != want {
		t.Fatalf("promoted %s, want the replica %s", promoted.Addr(), want.Addr())
	}
	if owner, err := c.Owner(slot); err != nil || owner != promoted {
		t.Fatalf("slot %d served by %v (%v) after the failover, want %s", slot, owner, err, promoted.Addr())
	}
	if _, err := cc.do("SET", "{m}:after", "1"); err != nil {
		t.Fatalf("a write after the failover: %v", err)
	}
	check("after the failover")

	// The crashed master comes back as a replica of the promoted one.
	if err := to.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		role, err := to.Call("ROLE")
		r, _ := role.([]any)
		if err == nil && len(r) >= 4 && r[0] == "slave" && r[2] == int64(promoted.port) && r[3] == "connected" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node: ROLE = %#v, %v; want a replica of %s", role, err, promoted.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestStartClusterWithRefusesBadInput(t *testing.T) {
	for _, opts := range [][]ClusterOption{
		{WithReplicas(-1)},
		{WithReplicas(MaxReplicas + 1)},
		{WithNodeTimeout(time.Millisecond)},
	} {
		if _, err := StartClusterWith(t.TempDir(), 3, opts...); err == nil {
			t.Errorf("StartClusterWith: no error")
		}
	}
	if _, err := StartClusterWith(t.TempDir(), 2); err == nil {
		t.Error("2 masters: no error")
	}
}

func TestParseClusterNodes(t *testing.T) {
	text := "07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected\n" +
		"e7d1 127.0.0.1:30001@40001,host myself,master - 0 0 1 connected 0-5460 7000 [5461->-292f]\n"
	nodes, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].master != "e7d1" || !nodes[1].has("master") || nodes[1].addr != "127.0.0.1:30001" {
		t.Fatalf("nodes = %+v", nodes)
	}
	if got := fmt.Sprint(nodes[1].slots); got != "[[0 5460] [7000 7000]]" {
		t.Fatalf("slots = %s", got)
	}
	for _, bad := range []string{"a b c\n", "x 1:1 master - 0 0 1 connected 1-x\n", "x 1:1 master - 0 0 1 connected y\n"} {
		if _, err := parseClusterNodes(bad); err == nil {
			t.Errorf("parseClusterNodes(%q): no error", bad)
		}
	}
}
