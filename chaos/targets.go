package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/zkproc"
)

// member is one server process of a store configuration and what a
// fault can do to it.
type member struct {
	name  string
	ctl   proc.Member
	clock *proc.Clock // nil: the server runs on the real clock
}

// target is a running store configuration.
type target struct {
	name    string
	url     string // what the workers open; through the proxies when there are any
	members []*member
	// proxies[i] carries the clients' traffic to members[i] (toxiproxy),
	// when the configuration lets clients reach every member through one.
	proxies []*toxiproxy.Proxy
	// primary is the member a member fault hits for a lock key: the
	// primary or leader where the configuration has one, else the first.
	primary func(key string) int
	// leaseFloor is the shortest lease the store keeps: etcd's leases
	// count whole seconds and have a minimum, so its locks outlive a
	// shorter TTL. Faults are timed in multiples of the longer of the two.
	leaseFloor time.Duration
	noClock    string              // why the servers run on the real clock, if they do
	sentinel   *redisproc.Sentinel // the Sentinel group, for failover
	cluster    *redisproc.Cluster  // the Redis Cluster, for failover and slot migration
	// isolate cuts members[i] off from every other member, both ways
	// (member-partition), and returns the heal; nil where it cannot, and
	// noIsolate says why.
	isolate   func(i int) (heal func() error, err error)
	noIsolate string
	stop      []func()
}

// lease is how long a lock of this store outlives its holder's last
// renewal, at the workers' TTL.
func (t *target) lease(ttl time.Duration) time.Duration { return max(ttl, t.leaseFloor) }

func (t *target) close() {
	for i := len(t.stop) - 1; i >= 0; i-- {
		t.stop[i]()
	}
}

// storeDef is a store configuration the runner can start.
type storeDef struct {
	config string // what is started, for the table
	start  func(dir string, ttl time.Duration) (*target, error)
}

// stores are the configurations, by name.
func stores() map[string]storeDef {
	return map[string]storeDef{
		"redis": {"one redis-server, no persistence", startRedis},
		"redis-aof-always": {"one redis-server, appendonly yes, appendfsync always", func(dir string, _ time.Duration) (*target, error) {
			return startRedisAOF(dir, "redis-aof-always", redisproc.FsyncAlways)
		}},
		"redis-aof-everysec": {"one redis-server, appendonly yes, appendfsync everysec (Redis's default policy)", func(dir string, _ time.Duration) (*target, error) {
			return startRedisAOF(dir, "redis-aof-everysec", redisproc.FsyncEverySec)
		}},
		"redis-sentinel": {"redis-server primary + 1 replica + 3 Sentinels, no persistence (redis+sentinel://)", func(dir string, ttl time.Duration) (*target, error) {
			return startSentinel(dir, "redis-sentinel", "")
		}},
		"redis-sentinel-wait": {"as redis-sentinel, with ?wait_replicas=1", func(dir string, ttl time.Duration) (*target, error) {
			return startSentinel(dir, "redis-sentinel-wait", "?wait_replicas=1&wait_timeout=100ms")
		}},
		"redis-cluster": {"Redis Cluster, 3 primaries + 3 replicas, no persistence", startRedisCluster},
		"redlock": {"Redlock of 5 redis-servers, no persistence", func(dir string, ttl time.Duration) (*target, error) {
			return startRedlock(dir, 5, ttl)
		}},
		"etcd":      {"etcd cluster of 3 members", startEtcd},
		"zookeeper": {"ZooKeeper ensemble of 3 servers", startZooKeeper},
		"postgres":  {"PostgreSQL (synchronous_commit on, its default)", startPostgres},
		"mysql":     {"MariaDB", startMySQL},
		"fallback":  {"fallback pair: redis-server primary, PostgreSQL secondary", startFallback},
	}
}

// storeOrder is the order of stores in the table and in --all.
var storeOrder = []string{"redis", "redis-aof-always", "redis-aof-everysec", "redis-sentinel", "redis-sentinel-wait", "redis-cluster", "redlock", "etcd", "zookeeper", "postgres", "mysql", "fallback"}

// proxyServer hosts the proxies of every target.
var proxyServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())

// proxy puts a toxiproxy in front of upstream and registers its stop.
func (t *target) proxy(name, upstream string) (string, error) {
	p := toxiproxy.NewProxy(proxyServer, t.name+"-"+name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("proxy for %s: %w", name, err)
	}
	t.proxies = append(t.proxies, p)
	t.stop = append(t.stop, func() {
		p.Toxics.ResetToxics(context.Background())
		p.Stop()
	})
	return p.Listen, nil
}

func first(string) int { return 0 }

// clockFor makes a wrong clock for a server whose files are in dir.
func clockFor(dir string) (*proc.Clock, error) {
	return proc.NewClock(filepath.Join(dir, "faketime"))
}

func startRedis(dir string, _ time.Duration) (*target, error) {
	return startRedisNamed(dir, "redis")
}

// startRedisAOF is one redis-server with an append-only file fsynced as
// policy says: a crashed server restarts with the locks the file holds,
// each with its absolute expiry time.
func startRedisAOF(dir, name string, policy redisproc.AppendFsync) (*target, error) {
	return startRedisNamed(dir, name, redisproc.WithAppendOnly(policy))
}

// startRedisNamed is one redis-server under a clock of its own, reached
// through a proxy, started with opts.
func startRedisNamed(dir, name string, opts ...redisproc.Option) (*target, error) {
	clock, err := clockFor(dir)
	if err != nil {
		return nil, err
	}
	s, err := redisproc.StartWith(dir, append([]redisproc.Option{redisproc.WithClock(clock)}, opts...)...)
	if err != nil {
		return nil, err
	}
	t := &target{name: name, primary: first, stop: []func(){s.Kill}}
	t.members = []*member{{name: "redis-server", ctl: s, clock: clock}}
	addr, err := t.proxy("redis", s.Addr())
	if err != nil {
		t.close()
		return nil, err
	}
	t.url = "redis://" + addr
	return t, nil
}

// fullOnly are the configurations --quick leaves out: they differ from
// one it runs only in what they keep across a restart.
var fullOnly = map[string]bool{"redis-aof-always": true, "redis-aof-everysec": true}

// quickStores are the configurations of --quick: storeOrder without
// fullOnly.
func quickStores() []string {
	var out []string
	for _, n := range storeOrder {
		if !fullOnly[n] {
			out = append(out, n)
		}
	}
	return out
}

// startSentinel: the Sentinels tell clients the address at which they
// reach the primary, so clients and members reach each data node through
// one link, which tells them apart by their source address. The data
// nodes run under clocks of their own, the Sentinels on the real clock
// (see redisproc.WithNodeClocks): a clock fault moves the primary's,
// which expires the lock's key.
func startSentinel(dir, name, query string) (*target, error) {
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
	t := &target{name: name, sentinel: g, url: g.URL() + query, stop: []func(){ln.close, g.Kill},
		isolate: func(i int) (func() error, error) { return ln.isolate(strconv.Itoa(i)), nil }}
	for i, n := range g.Nodes() {
		t.members = append(t.members, &member{name: "data node " + strconv.Itoa(i+1), ctl: n, clock: n.Clock()})
	}
	t.primary = func(string) int {
		p, err := g.Primary()
		for i, n := range g.Nodes() {
			if err == nil && n == p {
				return i
			}
		}
		return 0
	}
	return t, nil
}

// startRedisCluster: the cluster tells clients its nodes' own addresses,
// so client traffic cannot go through a proxy.
func startRedisCluster(dir string, _ time.Duration) (*target, error) {
	c, err := redisproc.StartClusterWith(dir, 3, redisproc.WithReplicas(1), redisproc.WithNodeTimeout(time.Second),
		redisproc.WithClusterClocks())
	if err != nil {
		return nil, err
	}
	t := &target{name: "redis-cluster", cluster: c, url: c.URL(), stop: []func(){c.Kill},
		noIsolate: "not built for Redis Cluster: its nodes would have to announce links (cluster-announce-port, cluster-announce-bus-port) and dial each other from addresses of their own, as the Sentinel groups' data nodes do"}
	for i, n := range c.Nodes() {
		t.members = append(t.members, &member{name: "node " + strconv.Itoa(i+1), ctl: n, clock: n.Clock()})
	}
	t.primary = func(key string) int {
		owner, err := c.Owner(clusterslot.Of("{" + key + "}"))
		for i, n := range c.Nodes() {
			if err == nil && n == owner {
				return i
			}
		}
		return 0
	}
	return t, nil
}

func startRedlock(dir string, n int, ttl time.Duration) (*target, error) {
	t := &target{name: "redlock", primary: first}
	var addrs []string
	for i := range n {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.close()
			return nil, err
		}
		clock, err := clockFor(d)
		if err != nil {
			t.close()
			return nil, err
		}
		s, err := redisproc.StartWith(d, redisproc.WithClock(clock))
		if err != nil {
			t.close()
			return nil, err
		}
		t.stop = append(t.stop, s.Kill)
		t.members = append(t.members, &member{name: "node " + strconv.Itoa(i+1), ctl: s, clock: clock})
		addr, err := t.proxy("node"+strconv.Itoa(i), s.Addr())
		if err != nil {
			t.close()
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	// A restarted node refuses grants for a quarantine that must outlast
	// every lease it may have forgotten: the workers' TTL, with margin
	// (the default, 35 s, covers the default TTL of 30 s).
	t.url = "redlock://" + strings.Join(addrs, ",") + "?quarantine=" + (2 * ttl).String()
	return t, nil
}

// etcdLeaseFloor: etcd rounds a lease up to whole seconds and grants at
// least 1.5 election timeouts (1.5 s at the defaults), and expires leases
// on a coarse timer: a lock can live ~3 s after its last renewal.
const etcdLeaseFloor = 3 * time.Second

func startEtcd(dir string, _ time.Duration) (*target, error) {
	// Every member's peer port is reached through a link, which knows the
	// sender of each raft connection by its X-Server-From header (the
	// sender's id in hexadecimal).
	ln := newLinks()
	c, err := etcdproc.StartCluster(dir, 3, etcdproc.WithPeerLinks(func(member int, addr string) (string, error) {
		return ln.link(strconv.Itoa(member), addr, byHeader("X-Server-From"))
	}))
	if err != nil {
		ln.close()
		return nil, err
	}
	t := &target{name: "etcd", leaseFloor: etcdLeaseFloor, stop: []func(){ln.close, c.Kill},
		noClock: "etcd is a Go program: Go reads the clock through the vDSO, not libc, so libfaketime cannot move it",
		isolate: func(i int) (func() error, error) {
			return ln.isolate(strconv.Itoa(i), strconv.FormatUint(c.ID(i), 16)), nil
		}}
	var addrs []string
	for i, m := range c.Members() {
		t.members = append(t.members, &member{name: "member " + strconv.Itoa(i+1), ctl: m})
		addr, err := t.proxy("member"+strconv.Itoa(i), m.Addr())
		if err != nil {
			t.close()
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	t.primary = func(string) int {
		l, err := c.Leader()
		if err != nil {
			return 0
		}
		return l
	}
	t.url = "etcd://" + strings.Join(addrs, ",")
	return t, nil
}

// zkSession is the ZooKeeper session timeout the workers ask for: the
// shortest a server grants at its default tick (2 × 2 s). A lock node is
// ephemeral: it outlives its holder by up to this long.
const zkSession = 4 * time.Second

func startZooKeeper(dir string, _ time.Duration) (*target, error) {
	// The servers reach each other through a link per pair, direction and
	// port, known by the pair and the port's address (its upstream).
	ln := newLinks()
	var mu sync.Mutex
	byUpstream := map[[3]string]string{}
	reverse := func(from, to, upstream string) string {
		mu.Lock()
		defer mu.Unlock()
		return byUpstream[[3]string{from, to, upstream}]
	}
	e, err := zkproc.StartEnsemble(dir, 3, zkproc.WithClocks(), zkproc.WithLinks(func(from, to int, upstream string) (string, error) {
		f, t := strconv.Itoa(from), strconv.Itoa(to)
		addr, err := ln.link(t, upstream, zkPeer(f, t, reverse))
		if err == nil {
			mu.Lock()
			byUpstream[[3]string{f, t, upstream}] = addr
			mu.Unlock()
		}
		return addr, err
	}))
	if err != nil {
		ln.close()
		return nil, err
	}
	t := &target{name: "zookeeper", stop: []func(){ln.close, e.Kill}, leaseFloor: zkSession,
		isolate: func(i int) (func() error, error) { return ln.isolate(strconv.Itoa(i)), nil }}
	var addrs []string
	for i, m := range e.Members() {
		t.members = append(t.members, &member{name: "server " + strconv.Itoa(i+1), ctl: m, clock: m.Clock()})
		addr, err := t.proxy("server"+strconv.Itoa(i), m.Addr())
		if err != nil {
			t.close()
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	t.primary = func(string) int {
		l, err := e.Leader()
		if err != nil {
			return 0
		}
		return l
	}
	// The session is the lease: a short session timeout is the short TTL.
	t.url = "zookeeper://" + strings.Join(addrs, ",") + "?session_timeout=" + zkSession.String()
	return t, nil
}

func startPostgres(string, time.Duration) (*target, error) {
	s, err := pgproc.StartWith(pgproc.Options{Clock: true, SyncCommit: true})
	if err != nil {
		return nil, err
	}
	return single("postgres", s, s.Clock(), s.Addr(), s.URL(), s.Kill)
}

func startMySQL(dir string, _ time.Duration) (*target, error) {
	s, err := mysqlproc.StartWith(dir, mysqlproc.Options{Clock: true})
	if err != nil {
		return nil, err
	}
	return single("mysql", s, s.Clock(), s.Addr(), s.URL(), s.Remove, s.Kill) // close runs them last first
}

// single is a target of one server at addr under clock, reached through
// a proxy: rawURL with its host replaced by the proxy's. stop ends the
// server.
func single(name string, s proc.Member, clock *proc.Clock, addr, rawURL string, stop ...func()) (*target, error) {
	t := &target{name: name, primary: first, stop: stop}
	t.members = []*member{{name: name, ctl: s, clock: clock}}
	proxied, err := t.proxy(name, addr)
	if err == nil {
		t.url, err = withHost(rawURL, proxied)
	}
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func startFallback(dir string, ttl time.Duration) (*target, error) {
	r, err := startRedis(dir, ttl)
	if err != nil {
		return nil, err
	}
	pg, err := startPostgres(dir, ttl)
	if err != nil {
		r.close()
		return nil, err
	}
	t := &target{name: "fallback", primary: first, noClock: "clock jumps are measured on the pair's servers alone (see redis and postgres)"}
	t.members = append(r.members, pg.members...)
	t.proxies = append(r.proxies, pg.proxies...)
	t.stop = []func(){r.close, pg.close}
	// The grace covers the workers' TTL: a lock granted by the primary
	// cannot outlive a switch to the secondary.
	t.url = "fallback://?primary=" + url.QueryEscape(r.url) + "&secondary=" + url.QueryEscape(pg.url) +
		"&grace=" + max(2*time.Second, 2*ttl).String() + "&trip_after=2&open_timeout=1s"
	return t, nil
}

// withHost is raw with its host:port replaced by addr.
func withHost(raw, addr string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}
