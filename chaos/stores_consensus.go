package main

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/zkproc"
)

// etcdCluster is an etcd cluster of three members, whose peer traffic
// goes through links.
type etcdCluster struct {
	*deployment
	c  *etcdproc.Cluster
	ln *links
}

// etcdLeaseFloor: etcd rounds a lease up to whole seconds and grants at
// least 1.5 election timeouts (1.5 s at the defaults), and expires leases
// on a coarse timer: a lock can live ~3 s after its last renewal.
const etcdLeaseFloor = 3 * time.Second

func startEtcd(dir string, _ time.Duration) (target, error) {
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
	t := &etcdCluster{deployment: &deployment{name: "etcd", stop: []func(){ln.close, c.Kill}}, c: c, ln: ln}
	hosts, err := addMembers(t.deployment, "member", c.Members(), nil)
	if err != nil {
		t.close()
		return nil, err
	}
	t.url = "etcd://" + hosts
	return t, nil
}

// primary is the leader, or the first member while there is none.
func (t *etcdCluster) primary(string) int { return leaderOr0(t.c.Leader()) }

func (*etcdCluster) leaseFloor() time.Duration { return etcdLeaseFloor }

func (*etcdCluster) noClock() string {
	return "etcd is a Go program: Go reads the clock through the vDSO, not libc, so libfaketime cannot move it"
}

func (t *etcdCluster) isolate(i int) (func() error, error) {
	return t.ln.isolate(strconv.Itoa(i), strconv.FormatUint(t.c.ID(i), 16)), nil
}

// zkEnsemble is a ZooKeeper ensemble of three servers, which reach each
// other through links.
type zkEnsemble struct {
	*deployment
	linkedMembers
	e *zkproc.Ensemble
}

// zkSession is the ZooKeeper session timeout the workers ask for: the
// shortest a server grants at its default tick (2 × 2 s). A lock node is
// ephemeral: it outlives its holder by up to this long.
const zkSession = 4 * time.Second

func startZooKeeper(dir string, _ time.Duration) (target, error) {
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
	t := &zkEnsemble{deployment: &deployment{name: "zookeeper", stop: []func(){ln.close, e.Kill}}, linkedMembers: linkedMembers{ln}, e: e}
	hosts, err := addMembers(t.deployment, "server", e.Members(), (*zkproc.Server).Clock)
	if err != nil {
		t.close()
		return nil, err
	}
	// The session is the lease: a short session timeout is the short TTL.
	t.url = "zookeeper://" + hosts + "?session_timeout=" + zkSession.String()
	return t, nil
}

// primary is the leader, or the first server while there is none.
func (t *zkEnsemble) primary(string) int { return leaderOr0(t.e.Leader()) }

func (*zkEnsemble) leaseFloor() time.Duration { return zkSession }

func leaderOr0(i int, err error) int {
	if err != nil {
		return 0
	}
	return i
}

// addMembers adds servers to d as members, each named label and its
// number, under the clock clockOf says (none if clockOf is nil) and
// behind a proxy, and returns the proxies' addresses, comma-separated.
func addMembers[S interface {
	proc.Member
	Addr() string
}](d *deployment, label string, servers []S, clockOf func(S) *proc.Clock) (string, error) {
	addrs := make([]string, 0, len(servers))
	for _, s := range servers {
		var clock *proc.Clock
		if clockOf != nil {
			clock = clockOf(s)
		}
		addr, err := d.addMember(label, s, clock, s.Addr())
		if err != nil {
			return "", err
		}
		addrs = append(addrs, addr)
	}
	return strings.Join(addrs, ","), nil
}
