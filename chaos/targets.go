package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/zkproc"
)

// member is one server process of a store configuration and what a
// fault can do to it. A nil function is a control this member lacks.
type member struct {
	name    string
	pause   func() error // SIGSTOP
	resume  func() error // SIGCONT
	kill    func()       // SIGKILL
	restart func() error // start again on the same port (after kill)
}

// target is a running store configuration.
type target struct {
	name    string
	url     string // what the workers open; through the proxies when there are any
	members []*member
	// proxies[i] carries the clients' traffic to members[i] (toxiproxy),
	// when the configuration lets clients reach every member through one.
	proxies []*toxiproxy.Proxy
	// primary is the member a member fault hits: the primary or leader
	// where the configuration has one, else the first.
	primary func() int
	// persistent: a killed and restarted member comes back with its data.
	persistent bool
	// leaseFloor is the shortest lease the store keeps: etcd's leases
	// count whole seconds and have a minimum, so its locks outlive a
	// shorter TTL. Faults are timed in multiples of the longer of the two.
	leaseFloor time.Duration
	stop       []func()
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

// stores are the configurations, by name, in the order of the table.
func stores() map[string]storeDef {
	return map[string]storeDef{
		"redis": {"one redis-server, no persistence", startRedis},
		"redlock": {"Redlock of 5 redis-servers, no persistence", func(dir string, ttl time.Duration) (*target, error) {
			return startRedlock(dir, 5, ttl)
		}},
		"etcd":      {"etcd", startEtcd},
		"zookeeper": {"ZooKeeper", startZooKeeper},
		"postgres":  {"PostgreSQL", startPostgres},
		"mysql":     {"MariaDB", startMySQL},
		"fallback":  {"fallback pair: redis-server primary, PostgreSQL secondary", startFallback},
	}
}

// storeOrder is the order of stores in the table and in --all.
var storeOrder = []string{"redis", "redlock", "etcd", "zookeeper", "postgres", "mysql", "fallback"}

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

func first() int { return 0 }

func redisMember(name string, s *redisproc.Server) *member {
	return &member{name: name, kill: s.Kill, restart: s.Restart}
}

func startRedis(dir string, _ time.Duration) (*target, error) {
	s, err := redisproc.Start(dir)
	if err != nil {
		return nil, err
	}
	t := &target{name: "redis", primary: first, stop: []func(){s.Kill}}
	t.members = []*member{redisMember("redis-server", s)}
	addr, err := t.proxy("redis", s.Addr())
	if err != nil {
		t.close()
		return nil, err
	}
	t.url = "redis://" + addr
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
		s, err := redisproc.Start(d)
		if err != nil {
			t.close()
			return nil, err
		}
		t.stop = append(t.stop, s.Kill)
		t.members = append(t.members, redisMember("node "+strconv.Itoa(i+1), s))
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

func startEtcd(dir string, _ time.Duration) (*target, error) {
	s, err := etcdproc.Start(dir)
	if err != nil {
		return nil, err
	}
	t := &target{name: "etcd", primary: first, persistent: true, stop: []func(){s.Kill}, leaseFloor: etcdLeaseFloor}
	t.members = []*member{{name: "etcd", kill: s.Kill}}
	addr, err := t.proxy("etcd", s.Addr())
	if err != nil {
		t.close()
		return nil, err
	}
	t.url = "etcd://" + addr
	return t, nil
}

func startZooKeeper(dir string, _ time.Duration) (*target, error) {
	s, err := zkproc.Start(dir)
	if err != nil {
		return nil, err
	}
	t := &target{name: "zookeeper", primary: first, persistent: true, stop: []func(){s.Kill}}
	t.members = []*member{{name: "zookeeper", kill: s.Kill}}
	addr, err := t.proxy("zookeeper", s.Addr())
	if err != nil {
		t.close()
		return nil, err
	}
	t.url = "zookeeper://" + addr + "?session_timeout=4s"
	return t, nil
}

func startPostgres(string, time.Duration) (*target, error) {
	s, err := pgproc.Start()
	if err != nil {
		return nil, err
	}
	t := &target{name: "postgres", primary: first, persistent: true, stop: []func(){s.Kill}}
	t.members = []*member{{name: "postgres", kill: s.Kill}}
	addr, err := t.proxy("postgres", s.Addr())
	if err != nil {
		t.close()
		return nil, err
	}
	t.url, err = withHost(s.URL(), addr)
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func startMySQL(dir string, _ time.Duration) (*target, error) {
	s, err := mysqlproc.Start(dir)
	if err != nil {
		return nil, err
	}
	t := &target{name: "mysql", primary: first, persistent: true, stop: []func(){s.Kill, s.Remove}}
	t.members = []*member{{name: "mariadbd", kill: s.Kill, restart: s.Restart}}
	addr, err := t.proxy("mysql", s.Addr())
	if err != nil {
		t.close()
		return nil, err
	}
	t.url, err = withHost(s.URL(), addr)
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
	t := &target{name: "fallback", primary: first}
	t.members = append(r.members, pg.members...)
	t.proxies = append(r.proxies, pg.proxies...)
	t.stop = []func(){r.close, pg.close}
	// The grace covers the workers' TTL: a lock granted by the primary
	// cannot outlive a switch to the secondary.
	t.url = "fallback://?primary=" + url.QueryEscape(r.url) + "&secondary=" + url.QueryEscape(pg.url) +
		"&grace=" + (2 * time.Second).String() + "&trip_after=2&open_timeout=1s"
	return t, nil
}

// etcdLeaseFloor: etcd rounds a lease up to whole seconds and grants at
// least 1.5 election timeouts (1.5 s at the defaults), and expires leases
// on a coarse timer: a lock can live ~3 s after its last renewal.
const etcdLeaseFloor = 3 * time.Second

// withHost is raw with its host:port replaced by addr.
func withHost(raw, addr string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}
