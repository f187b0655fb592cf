package main

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// sentinelGroup is a Redis primary with a replica and the Sentinels that
// fail over between them.
type sentinelGroup struct {
	*deployment
	linkedMembers
	g *redisproc.Sentinel
}

// startSentinel: the Sentinels tell clients the address at which they
// reach the primary, so clients and members reach each data node through
// one link, which tells them apart by their source address. The data
// nodes run under clocks of their own, the Sentinels on the real clock
// (see redisproc.WithNodeClocks): a clock fault moves the primary's,
// which expires the lock's key.
func startSentinel(dir, name, query string) (target, error) {
	ln := newLinks()
	sources := map[string]string{redisproc.SentinelSource: "sentinels"}
	for i := range 2 {
		sources[redisproc.NodeSource(i)] = strconv.Itoa(i)
	}
	g, err := redisproc.StartSentinelWith(dir, 1, 3, redisproc.WithNodeClocks(),
		redisproc.WithNodeLinks(func(node int, addr string) (string, error) {
			return ln.link(strconv.Itoa(node), addr, bySource(sources))
		}))
	if err != nil {
		ln.close()
		return nil, err
	}
	t := &sentinelGroup{deployment: &deployment{name: name, url: g.URL() + query, stop: []func(){ln.close, g.Kill}},
		linkedMembers: linkedMembers{ln}, g: g}
	for i, n := range g.Nodes() {
		t.members = append(t.members, &member{name: "data node " + strconv.Itoa(i+1), ctl: n, clock: n.Clock()})
	}
	return t, nil
}

// primary is the data node the Sentinels name, or the first.
func (t *sentinelGroup) primary(string) int {
	p, err := t.g.Primary()
	return nodeIndex(t.g.Nodes(), p, err)
}

// replicaOf is the data node that is not m.
func (t *sentinelGroup) replicaOf(m *member) (proc.Member, error) {
	var replica proc.Member
	for _, n := range t.g.Nodes() {
		if proc.Member(n) != m.ctl {
			replica = n
		}
	}
	if replica == nil {
		return nil, errors.New("no replica to fail over to")
	}
	return replica, nil
}

func (t *sentinelGroup) awaitFailover(m *member) error {
	s, ok := m.ctl.(*redisproc.Server)
	if !ok {
		return errors.New("the Sentinel group's primary is no redis-server")
	}
	_, err := t.g.WaitFailoverFrom(s.Addr(), time.Minute)
	return err
}

// rejoin: the old primary comes back as a replica of the primary the
// Sentinels promoted, as a deployment that follows its Sentinels
// configures it; without that it would start as a second primary until
// the Sentinels notice.
func (t *sentinelGroup) rejoin(m *member) error {
	s, ok := m.ctl.(*redisproc.Server)
	if !ok {
		return nil
	}
	addr, err := t.g.PrimaryAddr()
	if err != nil || addr == t.g.PeerAddr(s) {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err = s.Do("REPLICAOF", host, port); err != nil {
		return err
	}
	// Into its configuration file, as the Sentinels do: a later
	// restart keeps the role.
	_, err = s.Do("CONFIG", "REWRITE")
	return err
}

// redisCluster is a Redis Cluster of three primaries, each with a
// replica.
type redisCluster struct {
	*deployment
	c *redisproc.Cluster
}

// startRedisCluster: the cluster tells clients its nodes' own addresses,
// so client traffic cannot go through a proxy.
func startRedisCluster(dir string, _ time.Duration) (target, error) {
	c, err := redisproc.StartClusterWith(dir, 3, redisproc.WithReplicas(1), redisproc.WithNodeTimeout(time.Second),
		redisproc.WithClusterClocks())
	if err != nil {
		return nil, err
	}
	t := &redisCluster{deployment: &deployment{name: "redis-cluster", url: c.URL(), stop: []func(){c.Kill}}, c: c}
	for i, n := range c.Nodes() {
		t.members = append(t.members, &member{name: "node " + strconv.Itoa(i+1), ctl: n, clock: n.Clock()})
	}
	return t, nil
}

// primary is the node that serves the key's slot, or the first.
func (t *redisCluster) primary(key string) int {
	owner, err := t.c.Owner(clusterslot.Of("{" + key + "}"))
	return nodeIndex(t.c.Nodes(), owner, err)
}

func (*redisCluster) noIsolate() string {
	return "not built for Redis Cluster: its nodes would have to announce links (cluster-announce-port, cluster-announce-bus-port) and dial each other from addresses of their own, as the Sentinel groups' data nodes do"
}

func (t *redisCluster) replicaOf(m *member) (proc.Member, error) {
	owner, ok := m.ctl.(*redisproc.Server)
	if !ok {
		return nil, errors.New("the cluster's primary is no redis-server")
	}
	r, err := t.c.ReplicaOf(owner)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (t *redisCluster) awaitFailover(*member) error { return t.c.WaitHealthy(time.Minute) }

func (t *redisCluster) migrateSlot(key string) error {
	slot := clusterslot.Of("{" + key + "}")
	from, err := t.c.Owner(slot)
	if err != nil {
		return err
	}
	primaries, err := t.c.Primaries()
	if err != nil {
		return err
	}
	for _, p := range primaries {
		if p != from {
			return t.c.MigrateSlot(slot, p)
		}
	}
	return errors.New("no other primary to migrate the slot to")
}

// nodeIndex is the index of n in nodes, or 0 when there was an error
// finding it or it is none of them.
func nodeIndex(nodes []*redisproc.Server, n *redisproc.Server, err error) int {
	for i, m := range nodes {
		if err == nil && m == n {
			return i
		}
	}
	return 0
}
