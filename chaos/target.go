package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// member is one server process of a store configuration and what a
// fault can do to it.
type member struct {
	name  string
	ctl   proc.Member
	clock *proc.Clock // nil: the server runs on the real clock
}

// target is a running store configuration. Every fault can act on its
// deployment; a fault that needs more asks for one of the capabilities
// below, which only the configurations that have it implement: a new
// store is a type of its own, with the capabilities it has.
type target interface {
	base() *deployment
	// primary is the index of the member a member fault hits for a lock
	// key: the primary or leader where the configuration has one.
	primary(key string) int
	close()
}

// isolator is a configuration whose members talk to each other through
// links that can cut one off from the others (member-partition).
type isolator interface {
	// isolate cuts members[i] off from every other member, both ways,
	// and returns the heal.
	isolate(i int) (heal func() error, err error)
}

// linkedMembers is an isolator whose members reach each other through
// links that know member i by the key i.
type linkedMembers struct{ ln *links }

func (l linkedMembers) isolate(i int) (func() error, error) {
	return l.ln.isolate(strconv.Itoa(i)), nil
}

// unisolable is a configuration whose members talk to each other through
// no link that could cut them apart: noIsolate says why.
type unisolable interface{ noIsolate() string }

// clockless is a configuration whose servers a clock fault does not
// move: noClock says why.
type clockless interface{ noClock() string }

// leaseFloored is a store that keeps a lock for at least leaseFloor,
// whatever shorter TTL the workers ask for.
type leaseFloored interface{ leaseFloor() time.Duration }

// failoverer is a configuration with replicas that take over from a
// failed primary (failover).
type failoverer interface {
	// replicaOf is the replica that takes over from the primary m.
	replicaOf(m *member) (proc.Member, error)
	// awaitFailover waits until a replica has taken over from the
	// crashed primary m.
	awaitFailover(m *member) error
}

// rejoiner is a configuration in which a restarted member must be told
// its place, as a deployment's tooling does.
type rejoiner interface{ rejoin(m *member) error }

// slotMigrator is a configuration that shards keys by slot
// (slot-migration).
type slotMigrator interface {
	// migrateSlot moves the slot of the lock key key to another primary.
	migrateSlot(key string) error
}

// deployment is what every store configuration has, and a target in
// itself: servers with no capability beyond them, whose first member
// faults hit.
type deployment struct {
	name    string
	url     string // what the workers open; through the proxies when there are any
	members []*member
	// proxies[i] carries the clients' traffic to members[i] (toxiproxy),
	// when the configuration lets clients reach every member through one.
	proxies []*toxiproxy.Proxy
	stop    []func()
}

func (d *deployment) base() *deployment { return d }

func (d *deployment) primary(string) int { return 0 }

func (d *deployment) close() {
	for i := len(d.stop) - 1; i >= 0; i-- {
		d.stop[i]()
	}
}

// leaseOf is how long a lock of t's store outlives its holder's last
// renewal, at the workers' TTL. Faults are timed in multiples of it.
func leaseOf(t target, ttl time.Duration) time.Duration {
	if f, ok := t.(leaseFloored); ok {
		return max(ttl, f.leaseFloor())
	}
	return ttl
}

// proxyServer hosts the proxies of every target.
var proxyServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())

// proxy puts a toxiproxy in front of upstream and registers its stop.
func (d *deployment) proxy(name, upstream string) (string, error) {
	p := toxiproxy.NewProxy(proxyServer, d.name+"-"+name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("proxy for %s: %w", name, err)
	}
	d.proxies = append(d.proxies, p)
	d.stop = append(d.stop, func() {
		p.Toxics.ResetToxics(context.Background())
		p.Stop()
	})
	return p.Listen, nil
}

// addMember adds a member named label and its number, under clock,
// behind a proxy to addr, and returns the proxy's address.
func (d *deployment) addMember(label string, ctl proc.Member, clock *proc.Clock, addr string) (string, error) {
	i := len(d.members)
	d.members = append(d.members, &member{name: label + " " + strconv.Itoa(i+1), ctl: ctl, clock: clock})
	return d.proxy(label+strconv.Itoa(i), addr)
}

// clockFor makes a wrong clock for a server whose files are in dir.
func clockFor(dir string) (*proc.Clock, error) {
	return proc.NewClock(filepath.Join(dir, "faketime"))
}

// The capabilities of each configuration: a method that drifts from its
// interface fails to build here, rather than quietly skipping a fault.
var (
	_ interface {
		isolator
		failoverer
		rejoiner
	} = (*sentinelGroup)(nil)
	_ interface {
		unisolable
		failoverer
		slotMigrator
	} = (*redisCluster)(nil)
	_ interface {
		isolator
		clockless
		leaseFloored
	} = (*etcdCluster)(nil)
	_ interface {
		isolator
		leaseFloored
	} = (*zkEnsemble)(nil)
	_ clockless = fallbackPair{}
)
