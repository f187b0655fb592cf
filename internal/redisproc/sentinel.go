package redisproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// SentinelInstallHint is the command that installs redis-sentinel on
// Debian.
const SentinelInstallHint = "apt-get update && apt-get install -y redis-server redis-sentinel"

// SentinelMasterSet is the name under which a Sentinel group started by
// StartSentinel monitors its primary.
const SentinelMasterSet = "turnstile"

// Sentinel settings of the groups StartSentinel starts: a primary that
// answers no PING for SentinelDownAfter is down for a Sentinel, and two
// Sentinels agreeing on it start a failover; a failover that stalls is
// tried again after SentinelFailoverTimeout.
const (
	SentinelQuorum          = 2
	SentinelDownAfter       = time.Second
	SentinelFailoverTimeout = 5 * time.Second
)

// Sentinel is a primary, its replicas and the Sentinels that watch them,
// each one redis-server process on loopback with persistence off. Every
// member is a *Server the caller can Kill, Pause, Resume and Restart. A
// data node restarts empty, in the role its configuration file names:
// the one it was started with, or the one the Sentinels gave it when they
// last reconfigured it (they rewrite the file); a primary that the
// Sentinels replaced meanwhile is turned into a replica by them once they
// see it. A Sentinel restarts with what it had learnt, which it keeps in
// its configuration file.
type Sentinel struct {
	nodes     []*Server // the data nodes; nodes[0] was the first primary
	sentinels []*Server
	primary   string             // the primary's address when last looked at (WaitFailover)
	tls       *TLS               // nil: plain text
	links     map[*Server]string // where the others reach each data node (WithNodeLinks)
}

// StartSentinel starts a primary, replicas replicas of it (--replicaof)
// and sentinels Sentinel processes monitoring it as SentinelMasterSet
// with quorum SentinelQuorum, each in a directory of its own under dir,
// and returns once every replica is in sync and every Sentinel knows
// every replica and every other Sentinel. Stop it with Kill.
//
// The Sentinels run redis-sentinel, or redis-server --sentinel where
// redis-sentinel is not installed.
func StartSentinel(dir string, replicas, sentinels int) (*Sentinel, error) {
	return startSentinel(dir, replicas, sentinels, nil, sentinelConfig{})
}

// A SentinelOption changes how StartSentinelWith runs a group.
type SentinelOption func(*sentinelConfig)

type sentinelConfig struct {
	clocks bool
	link   NodeLink
	linked bool // WithNodeLinks was given
}

// WithNodeClocks runs every data node — the primary and its replicas —
// under a wrong wall clock of its own (see proc.Clock and Server.Clock),
// in the node's directory, which the caller moves while the node runs.
// It needs libfaketime.
//
// The Sentinels run on the real clock: they hold no lock and no key, so
// their clock cannot shorten or lengthen a lease; it times only their
// failure detection, and a Sentinel whose clock jumps enters TILT mode
// (it stops acting for 30 s), which would turn a clock fault into a
// fault of failover, covered by killing and pausing nodes.
func WithNodeClocks() SentinelOption { return func(c *sentinelConfig) { c.clocks = true } }

// A NodeLink makes the address at which the other members of a Sentinel
// group (and so the clients the Sentinels tell) reach data node node
// (an index in Nodes), which listens at addr: a proxy of the caller's.
type NodeLink func(node int, addr string) (string, error)

// SentinelSource is the address the Sentinels of a group started with
// WithNodeLinks dial from (--bind-source-addr); NodeSource(i) is data
// node i's. Clients dial from 127.0.0.1: a proxy in front of a data node
// tells the members' connections from the clients' by their source.
const SentinelSource = "127.0.0.2"

// NodeSource is the address data node i of a group started with
// WithNodeLinks dials its primary from.
func NodeSource(i int) string { return "127.0.0." + strconv.Itoa(3+i) }

// WithNodeLinks has every data node reached at the address link makes
// for it, by the replicas (REPLICAOF), by the Sentinels (which monitor
// that address and tell it to clients as the primary's) and so by the
// clients; each node announces it (replica-announce-ip and -port). The
// members dial from SentinelSource and NodeSource(i), so that the
// caller's proxy can cut a node off from the other members while clients
// still reach it.
func WithNodeLinks(link NodeLink) SentinelOption {
	return func(c *sentinelConfig) { c.link, c.linked = link, true }
}

// StartSentinelWith starts a group as StartSentinel does, changed by
// opts.
func StartSentinelWith(dir string, replicas, sentinels int, opts ...SentinelOption) (*Sentinel, error) {
	var cfg sentinelConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.linked && cfg.link == nil {
		return nil, errors.New("start redis sentinel: WithNodeLinks without a link")
	}
	return startSentinel(dir, replicas, sentinels, nil, cfg)
}

// StartSentinelTLS starts a group as StartSentinel does whose members
// speak TLS only, to clients and to each other: each runs with --port 0
// --tls-port P --tls-replication yes and the certificates of t, the
// client certificate for their connections to each other.
func StartSentinelTLS(dir string, replicas, sentinels int, t TLS) (*Sentinel, error) {
	return startSentinel(dir, replicas, sentinels, &t, sentinelConfig{})
}

func startSentinel(dir string, replicas, sentinels int, t *TLS, cfg sentinelConfig) (*Sentinel, error) {
	if replicas < 0 || sentinels < SentinelQuorum {
		return nil, fmt.Errorf("start redis sentinel: %d replicas and %d sentinels: want replicas >= 0 and at least %d sentinels (the quorum)", replicas, sentinels, SentinelQuorum)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	sbin, sentinelFlag := bin, true
	if p, err := exec.LookPath("redis-sentinel"); err == nil {
		sbin, sentinelFlag = p, false
	}
	g := &Sentinel{tls: t}
	fail := func(err error) (*Sentinel, error) {
		g.Kill()
		return nil, fmt.Errorf("start redis sentinel: %w", err)
	}
	link := cfg.link
	primary, err := startMember(bin, filepath.Join(dir, "node0"), t, cfg.clocks, "", sourceArgs(link, 0))
	if err != nil {
		return fail(err)
	}
	g.nodes = append(g.nodes, primary)
	if err := g.linkNode(link, 0, primary); err != nil {
		return fail(err)
	}
	g.primary = g.PeerAddr(primary)
	host, port, _ := net.SplitHostPort(g.primary)
	for i := range replicas {
		conf := "replicaof " + host + " " + port + "\n"
		if link != nil {
			conf = "" // it replicates once it announces its link
		}
		r, err := startMember(bin, filepath.Join(dir, "node"+strconv.Itoa(i+1)), t, cfg.clocks, conf, sourceArgs(link, i+1))
		if err != nil {
			return fail(err)
		}
		g.nodes = append(g.nodes, r)
		if link == nil {
			continue
		}
		if err := g.linkNode(link, i+1, r); err != nil {
			return fail(err)
		}
		// Replicate through the primary's link, and keep that in the
		// configuration file for a restart.
		if _, err := r.Do("REPLICAOF", host, port); err != nil {
			return fail(err)
		}
		if _, err := r.Do("CONFIG", "REWRITE"); err != nil {
			return fail(err)
		}
	}
	// A Sentinel learns the replicas from the primary's INFO, which it
	// reads at once and then every 10 s: start it once they are there.
	deadline := time.Now().Add(30 * time.Second)
	if err := g.waitReplicas(deadline); err != nil {
		return fail(err)
	}
	for i := range sentinels {
		sdir := filepath.Join(dir, "sentinel"+strconv.Itoa(i))
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return fail(err)
		}
		// Sentinel rewrites its configuration file with what it learns:
		// the file must be its own and writable.
		conf := filepath.Join(sdir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s %[4]d\n"+
			"sentinel down-after-milliseconds %[1]s %[5]d\n"+
			"sentinel failover-timeout %[1]s %[6]d\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			SentinelMasterSet, host, port, SentinelQuorum, SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds())
		if link != nil {
			// The Sentinels dial from SentinelSource, but listen where
			// the others reach them.
			text += "sentinel announce-ip 127.0.0.1\n"
		}
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return fail(err)
		}
		var extra []string
		if sentinelFlag {
			extra = []string{"--sentinel"}
		}
		if link != nil {
			extra = append(extra, "--bind-source-addr", SentinelSource)
		}
		s, err := startMemberConf(sbin, sdir, conf, t, nil, extra)
		if err != nil {
			if sentinelFlag {
				err = fmt.Errorf("%w (redis-sentinel is not installed; install it with: %s)", err, SentinelInstallHint)
			}
			return fail(err)
		}
		g.sentinels = append(g.sentinels, s)
	}
	if err := g.waitSentinels(replicas, sentinels, deadline); err != nil {
		return fail(err)
	}
	return g, nil
}

// startMember starts one data node in a directory of its own, on a free
// port, trying other ports when the one picked was taken meanwhile. Any
// node may become the primary: each starts a replica's full sync at once
// rather than after the default 5 s wait for more replicas. With clock,
// the node runs under a wrong clock of its own, in dir.
//
// The node's role (conf: "" for a primary, a replicaof line for a
// replica) lives in its configuration file, dir/redis.conf, as in a
// deployment: the Sentinels rewrite it (CONFIG REWRITE) when they
// reconfigure the node, so a node restarted after a failover comes back
// with the role they gave it, not the one it was started with.
func startMember(bin, dir string, t *TLS, clock bool, conf string, extra []string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	var c *proc.Clock
	if clock {
		var err error
		if c, err = proc.NewClock(filepath.Join(dir, "clock")); err != nil {
			return nil, err
		}
	}
	return startMemberConf(bin, dir, path, t, c, append([]string{"--repl-diskless-sync-delay", "0"}, extra...))
}

// sourceArgs are the arguments of data node i of a linked group: it
// dials from NodeSource(i).
func sourceArgs(link NodeLink, i int) []string {
	if link == nil {
		return nil
	}
	return []string{"--bind-source-addr", NodeSource(i)}
}

// linkNode makes data node i's link, if the group has links, and has the
// node announce it, now and after a restart.
func (g *Sentinel) linkNode(link NodeLink, i int, n *Server) error {
	if link == nil {
		return nil
	}
	addr, err := link(i, n.Addr())
	if err != nil {
		return fmt.Errorf("link to data node %d: %w", i, err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("link to data node %d: %w", i, err)
	}
	if g.links == nil {
		g.links = map[*Server]string{}
	}
	g.links[n] = addr
	announce := []string{"replica-announce-ip", host, "replica-announce-port", port}
	if _, err := n.Do(append([]string{"CONFIG", "SET"}, announce...)...); err != nil {
		return fmt.Errorf("data node %d: %w", i, err)
	}
	n.extra = append(slices.Clip(n.extra), "--"+announce[0], announce[1], "--"+announce[2], announce[3])
	return nil
}

// PeerAddr is where the other members, and the clients the Sentinels
// tell, reach data node n: its link in a group started with
// WithNodeLinks, else its own address.
func (g *Sentinel) PeerAddr(n *Server) string {
	if a, ok := g.links[n]; ok {
		return a
	}
	return n.Addr()
}

// startMemberConf starts a member with a configuration file, or none
// (""), speaking TLS with t unless t is nil, under
// clock unless it is nil.
func startMemberConf(bin, dir, conf string, t *TLS, clock *proc.Clock, extra []string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := proc.FreePort()
		if err != nil {
			lastErr = err
			continue
		}
		s := &Server{bin: bin, dir: dir, port: port, conf: conf, extra: extra, clock: clock}
		if t != nil {
			if err := s.setTLS(*t); err != nil {
				return nil, err
			}
			// Members dial each other (replication, Sentinels' links)
			// with the client certificate: the server's is for servers.
			s.extra = append(slices.Clip(s.extra), "--tls-replication", "yes",
				"--tls-client-cert-file", t.ClientCert, "--tls-client-key-file", t.ClientKey)
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// waitReplicas waits until every replica's link to the primary is up,
// and the primary counts every replica online: only then does a replica
// acknowledge writes (WAIT).
func (g *Sentinel) waitReplicas(deadline time.Time) error {
	want := len(g.nodes) - 1
	for {
		info, err := g.nodes[0].Do("INFO", "replication")
		if err == nil && strings.Count(info, ",state=online,") == want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("primary %s does not count %d replicas online in time: %v %s", g.nodes[0].Addr(), want, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range g.nodes[1:] {
		for {
			info, err := r.Do("INFO", "replication")
			if err == nil && strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %s not in sync in time: %v %s", r.Addr(), err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// waitSentinels waits until every Sentinel reports the primary with all
// its replicas and every Sentinel (itself included).
func (g *Sentinel) waitSentinels(replicas, sentinels int, deadline time.Time) error {
	want := fmt.Sprintf("name=%s,status=ok,address=%s,slaves=%d,sentinels=%d", SentinelMasterSet, g.primary, replicas, sentinels)
	for _, s := range g.sentinels {
		for {
			info, err := s.Do("INFO", "sentinel")
			if err == nil && strings.Contains(info, want) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("sentinel %s not ready in time (want %s): %v %s", s.Addr(), want, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// MasterSet is the name the Sentinels monitor the primary under.
func (g *Sentinel) MasterSet() string { return SentinelMasterSet }

// SentinelAddrs are the Sentinels' host:port addresses.
func (g *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// URL is the group's turnstile URL:
// redis+sentinel://s1:p1,s2:p2,.../MASTERSET, or for a group that speaks
// TLS rediss+sentinel://...?ca_file=...&cert_file=...&key_file=...
func (g *Sentinel) URL() string {
	if g.tls == nil {
		return "redis+sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + SentinelMasterSet
	}
	return "rediss+sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + SentinelMasterSet + "?" + g.tls.Query()
}

// Nodes are the data nodes: Nodes()[0] is the primary the group started
// with, the others its replicas then.
func (g *Sentinel) Nodes() []*Server { return g.nodes }

// Sentinels are the Sentinel processes.
func (g *Sentinel) Sentinels() []*Server { return g.sentinels }

// PrimaryAddr asks the Sentinels, in turn until one answers, where the
// primary is (SENTINEL get-master-addr-by-name).
func (g *Sentinel) PrimaryAddr() (string, error) {
	var lastErr error
	for _, s := range g.sentinels {
		addr, err := masterAddr(s)
		if err != nil {
			lastErr = err
			continue
		}
		return addr, nil
	}
	return "", fmt.Errorf("no sentinel answered: %w", lastErr)
}

// Primary is the data node the Sentinels name as the primary.
func (g *Sentinel) Primary() (*Server, error) {
	addr, err := g.PrimaryAddr()
	if err != nil {
		return nil, err
	}
	for _, n := range g.nodes {
		if g.PeerAddr(n) == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the sentinels name %s as the primary, which is none of the group's nodes", addr)
}

// WaitFailover waits, at most timeout, until the Sentinels have promoted
// another node than the primary they named when the group started or
// WaitFailover last returned, and that node reports itself a primary
// (role:master). It returns the new primary.
func (g *Sentinel) WaitFailover(timeout time.Duration) (*Server, error) {
	return g.WaitFailoverFrom(g.primary, timeout)
}

// WaitFailoverFrom is WaitFailover away from the primary at address old:
// for a caller that knows which primary it crashed, when the Sentinels
// may have failed over on their own since WaitFailover last returned.
func (g *Sentinel) WaitFailoverFrom(old string, timeout time.Duration) (*Server, error) {
	deadline := time.Now().Add(timeout)
	for {
		// Every Sentinel that answers must agree: a client may ask any.
		var addr string
		agreed := true
		for _, s := range g.sentinels {
			a, err := masterAddr(s)
			if err != nil {
				continue // killed or paused
			}
			if a == old || (addr != "" && a != addr) {
				agreed = false
				break
			}
			addr = a
		}
		if agreed && addr != "" {
			for _, n := range g.nodes {
				if g.PeerAddr(n) != addr {
					continue
				}
				if info, err := n.Do("INFO", "replication"); err == nil && strings.Contains(info, "role:master") {
					g.primary = addr
					return n, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no failover away from %s within %v (sentinels name %q)", old, timeout, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops every member with SIGKILL.
func (g *Sentinel) Kill() {
	for _, s := range g.sentinels {
		s.Kill()
	}
	for _, n := range g.nodes {
		n.Kill()
	}
}

// masterAddr asks the Sentinel s where the primary is (SENTINEL
// get-master-addr-by-name).
func masterAddr(s *Server) (string, error) {
	reply, err := s.Call("SENTINEL", "get-master-addr-by-name", SentinelMasterSet)
	if err != nil {
		return "", err
	}
	if a, ok := reply.([]any); ok && len(a) == 2 {
		host, _ := a[0].(string)
		port, _ := a[1].(string)
		if host != "" && port != "" {
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", fmt.Errorf("sentinel %s: get-master-addr-by-name replied %v", s.Addr(), reply)
}
