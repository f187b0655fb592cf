package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// storeDef is a store configuration the runner can start.
type storeDef struct {
	config string // what is started, for the table
	start  func(dir string, ttl time.Duration) (target, error)
}

// stores are the configurations, by name.
func stores() map[string]storeDef {
	return map[string]storeDef{
		"redis": {"one redis-server, no persistence", func(dir string, _ time.Duration) (target, error) {
			return started(startRedis(dir, "redis"))
		}},
		"redis-aof-always": {"one redis-server, appendonly yes, appendfsync always", func(dir string, _ time.Duration) (target, error) {
			return started(startRedis(dir, "redis-aof-always", redisproc.WithAppendOnly(redisproc.FsyncAlways)))
		}},
		"redis-aof-everysec": {"one redis-server, appendonly yes, appendfsync everysec (Redis's default policy)", func(dir string, _ time.Duration) (target, error) {
			return started(startRedis(dir, "redis-aof-everysec", redisproc.WithAppendOnly(redisproc.FsyncEverySec)))
		}},
		"redis-sentinel": {"redis-server primary + 1 replica + 3 Sentinels, no persistence (redis+sentinel://)", func(dir string, _ time.Duration) (target, error) {
			return startSentinel(dir, "redis-sentinel", "")
		}},
		"redis-sentinel-wait": {"as redis-sentinel, with ?wait_replicas=1", func(dir string, _ time.Duration) (target, error) {
			return startSentinel(dir, "redis-sentinel-wait", "?wait_replicas=1&wait_timeout=100ms")
		}},
		"redis-cluster": {"Redis Cluster, 3 primaries + 3 replicas, no persistence", startRedisCluster},
		"redlock": {"Redlock of 5 redis-servers, no persistence", func(dir string, ttl time.Duration) (target, error) {
			return startRedlock(dir, 5, ttl)
		}},
		"etcd":      {"etcd cluster of 3 members", startEtcd},
		"zookeeper": {"ZooKeeper ensemble of 3 servers", startZooKeeper},
		"postgres": {"PostgreSQL (synchronous_commit on, its default)", func(string, time.Duration) (target, error) {
			return started(startPostgres())
		}},
		"mysql":    {"MariaDB", startMySQL},
		"fallback": {"fallback pair: redis-server primary, PostgreSQL secondary", startFallback},
	}
}

// storeOrder is the order of stores in the table and in --all.
var storeOrder = []string{"redis", "redis-aof-always", "redis-aof-everysec", "redis-sentinel", "redis-sentinel-wait", "redis-cluster", "redlock", "etcd", "zookeeper", "postgres", "mysql", "fallback"}

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

// started is what a start function made, as a target: nil when it
// failed, never a nil pointer in a target.
func started[T target](t T, err error) (target, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

// startRedis is one redis-server under a clock of its own, reached
// through a proxy, started with opts. With an append-only file
// (redisproc.WithAppendOnly) a crashed server restarts with the locks the
// file holds, each with its absolute expiry time.
func startRedis(dir, name string, opts ...redisproc.Option) (*deployment, error) {
	clock, err := clockFor(dir)
	if err != nil {
		return nil, err
	}
	s, err := redisproc.StartWith(dir, append([]redisproc.Option{redisproc.WithClock(clock)}, opts...)...)
	if err != nil {
		return nil, err
	}
	d := &deployment{name: name, stop: []func(){s.Kill}}
	d.members = []*member{{name: "redis-server", ctl: s, clock: clock}}
	addr, err := d.proxy("redis", s.Addr())
	if err != nil {
		d.close()
		return nil, err
	}
	d.url = "redis://" + addr
	return d, nil
}

func startRedlock(dir string, n int, ttl time.Duration) (target, error) {
	d := &deployment{name: "redlock"}
	var addrs []string
	for i := range n {
		addr, err := d.redlockNode(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			d.close()
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	// A restarted node refuses grants for a quarantine that must outlast
	// every lease it may have forgotten: the workers' TTL, with margin
	// (the default, 35 s, covers the default TTL of 30 s).
	d.url = "redlock://" + strings.Join(addrs, ",") + "?quarantine=" + (2 * ttl).String()
	return d, nil
}

// redlockNode starts the next node of a Redlock in dir, under a clock of
// its own, and returns the address of its proxy.
func (d *deployment) redlockNode(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	clock, err := clockFor(dir)
	if err != nil {
		return "", err
	}
	s, err := redisproc.StartWith(dir, redisproc.WithClock(clock))
	if err != nil {
		return "", err
	}
	d.stop = append(d.stop, s.Kill)
	return d.addMember("node", s, clock, s.Addr())
}

func startPostgres() (*deployment, error) {
	s, err := pgproc.StartWith(pgproc.Options{Clock: true, SyncCommit: true, LogConnections: true})
	if err != nil {
		return nil, err
	}
	return single("postgres", s, s.Clock(), s.Addr(), s.URL(), s.Kill)
}

func startMySQL(dir string, _ time.Duration) (target, error) {
	s, err := mysqlproc.StartWith(dir, mysqlproc.Options{Clock: true})
	if err != nil {
		return nil, err
	}
	return started(single("mysql", s, s.Clock(), s.Addr(), s.URL(), s.Remove, s.Kill)) // close runs them last first
}

// single is a deployment of one server at addr under clock, reached
// through a proxy: rawURL with its host replaced by the proxy's. stop
// ends the server.
func single(name string, s proc.Member, clock *proc.Clock, addr, rawURL string, stop ...func()) (*deployment, error) {
	d := &deployment{name: name, stop: stop}
	d.members = []*member{{name: name, ctl: s, clock: clock}}
	proxied, err := d.proxy(name, addr)
	if err == nil {
		d.url, err = withHost(rawURL, proxied)
	}
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// fallbackPair is a fallback pair of two deployments: its clock faults
// would move one server of the two.
type fallbackPair struct{ *deployment }

func (fallbackPair) noClock() string {
	return "clock jumps are measured on the pair's servers alone (see redis and postgres)"
}

func startFallback(dir string, ttl time.Duration) (target, error) {
	r, err := startRedis(dir, "redis")
	if err != nil {
		return nil, err
	}
	pg, err := startPostgres()
	if err != nil {
		r.close()
		return nil, err
	}
	d := &deployment{name: "fallback", members: append(r.members, pg.members...), proxies: append(r.proxies, pg.proxies...),
		stop: []func(){r.close, pg.close}}
	// The grace covers the workers' TTL: a lock granted by the primary
	// cannot outlive a switch to the secondary.
	d.url = "fallback://?primary=" + url.QueryEscape(r.url) + "&secondary=" + url.QueryEscape(pg.url) +
		"&grace=" + max(2*time.Second, 2*ttl).String() + "&trip_after=2&open_timeout=1s"
	return fallbackPair{d}, nil
}

// holdURL is the deployment's URL for workers whose locks the store
// holds for hold (a TTL and a lock delay): a fallback pair's grace and a
// Redlock's restart quarantine must cover it, or the store refuses to
// open (fallback) or to lock (redlock).
func (d *deployment) holdURL(hold time.Duration) (string, error) {
	u, err := url.Parse(d.url)
	if err != nil {
		return "", err
	}
	q := u.Query()
	changed := false
	if q.Has("grace") {
		q.Set("grace", max(2*time.Second, 2*hold).String())
		changed = true
	}
	if q.Has("quarantine") {
		q.Set("quarantine", (2 * hold).String())
		changed = true
	}
	if !changed {
		return d.url, nil
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
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
