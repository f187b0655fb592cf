package redisproc

import (
	"errors"
	"strconv"
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

// MasterSet is the name the Sentinels monitor the primary under.
func (g *Sentinel) MasterSet() string { return SentinelMasterSet }

// SentinelAddrs are the Sentinels' host:port addresses.
func (g *Sentinel) SentinelAddrs() []string { return proc.Addrs(g.sentinels) }

// URL is the group's turnstile URL:
// redis+sentinel://s1:p1,s2:p2,.../MASTERSET, or for a group that speaks
// TLS rediss+sentinel://...?ca_file=...&cert_file=...&key_file=...
func (g *Sentinel) URL() string {
	return turnstileURL(g.tls, "+sentinel", g.SentinelAddrs(), "/"+SentinelMasterSet)
}

// Nodes are the data nodes: Nodes()[0] is the primary the group started
// with, the others its replicas then.
func (g *Sentinel) Nodes() []*Server { return g.nodes }

// Sentinels are the Sentinel processes.
func (g *Sentinel) Sentinels() []*Server { return g.sentinels }

// PeerAddr is where the other members, and the clients the Sentinels
// tell, reach data node n: its link in a group started with
// WithNodeLinks, else its own address.
func (g *Sentinel) PeerAddr(n *Server) string {
	if a, ok := g.links[n]; ok {
		return a
	}
	return n.Addr()
}

// Kill stops every member with SIGKILL.
func (g *Sentinel) Kill() {
	proc.KillAll(g.sentinels)
	proc.KillAll(g.nodes)
}
