package redisproc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// A ClusterOption changes how StartClusterWith runs a cluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	replicas    int
	nodeTimeout time.Duration // 0: Redis's default, 15 s
	clocks      bool
}

// WithReplicas gives every master n replicas (redis-cli --cluster create
// --cluster-replicas n), and, unless WithNodeTimeout says otherwise, a
// cluster-node-timeout of DefaultFailoverNodeTimeout, so that a replica
// takes over from a failed master within seconds.
func WithReplicas(n int) ClusterOption { return func(c *clusterConfig) { c.replicas = n } }

// WithNodeTimeout sets every node's cluster-node-timeout: how long a node
// may not answer before the others mark it failed (and a replica of a
// failed master starts a failover).
func WithNodeTimeout(d time.Duration) ClusterOption {
	return func(c *clusterConfig) { c.nodeTimeout = d }
}

// WithClusterClocks runs every node under a wrong clock of its own (see
// proc.Clock and Server.Clock), which the caller moves while it runs. It
// needs libfaketime.
func WithClusterClocks() ClusterOption { return func(c *clusterConfig) { c.clocks = true } }

// DefaultFailoverNodeTimeout is the cluster-node-timeout of a cluster
// started WithReplicas.
const DefaultFailoverNodeTimeout = time.Second

// MaxReplicas is the most replicas per master WithReplicas takes.
const MaxReplicas = 3

// apply sets up node s, in its directory, as c says.
func (c clusterConfig) apply(s *Server) error {
	if c.nodeTimeout > 0 {
		s.extra = append(s.extra, "--cluster-node-timeout", strconv.FormatInt(c.nodeTimeout.Milliseconds(), 10))
	}
	if c.replicas > 0 {
		// A replica's full sync starts at once, not after the 5 s Redis
		// waits by default for more replicas to share the transfer.
		s.extra = append(s.extra, "--repl-diskless-sync-delay", "0")
	}
	if c.clocks && s.clock == nil {
		clock, err := proc.NewClock(filepath.Join(s.dir, "clock"))
		if err != nil {
			return err
		}
		s.clock = clock
	}
	return nil
}

// StartClusterWith starts a cluster of masters masters as StartCluster
// does, changed by opts: with replicas, a shorter node timeout, wrong
// clocks. With replicas it returns once every replica is in sync with
// its master.
func StartClusterWith(dir string, masters int, opts ...ClusterOption) (*Cluster, error) {
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.replicas < 0 || cfg.replicas > MaxReplicas {
		return nil, fmt.Errorf("start redis cluster: %d replicas per master, want 0 to %d", cfg.replicas, MaxReplicas)
	}
	if cfg.nodeTimeout < 0 || (cfg.nodeTimeout > 0 && cfg.nodeTimeout < 100*time.Millisecond) {
		return nil, fmt.Errorf("start redis cluster: node timeout %v, want at least 100ms", cfg.nodeTimeout)
	}
	if cfg.replicas > 0 && cfg.nodeTimeout == 0 {
		cfg.nodeTimeout = DefaultFailoverNodeTimeout
	}
	return startCluster(dir, masters, nil, cfg)
}

// waitReplicasInSync waits until every replica reports its link to its
// master up (ROLE: connected).
func (c *Cluster) waitReplicasInSync(ctx context.Context) error {
	for _, s := range c.nodes {
		for {
			role, err := s.Call("ROLE")
			r, _ := role.([]any)
			if err == nil && len(r) > 0 && (r[0] == "master" || (len(r) >= 4 && r[3] == "connected")) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("redis cluster node %s not in sync with its master within 60s: %v %v", s.Addr(), err, role)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	slots            [][2]int // served ranges, inclusive
}

func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// view is the cluster as the first running node that answers sees it
// (CLUSTER NODES).
func (c *Cluster) view() ([]clusterNode, error) {
	var lastErr error = errors.New("no redis cluster node is running")
	for _, s := range c.nodes {
		if !s.running() {
			continue
		}
		text, err := s.Do("CLUSTER", "NODES")
		if err != nil {
			lastErr = err
			continue
		}
		return parseClusterNodes(text)
	}
	return nil, lastErr
}

// parseClusterNodes reads CLUSTER NODES: id ip:port@busport[,hostname]
// flags master ping-sent pong-received epoch link-state slot...
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES: short line %q", strings.TrimSpace(line))
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being imported or migrated
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("CLUSTER NODES: bad slot %q", r)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("CLUSTER NODES: bad slot range %q", r)
				}
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// byAddr is the cluster's server at addr, or nil.
func (c *Cluster) byAddr(addr string) *Server {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Primaries are the masters that serve slots, as the cluster sees them
// now: after a failover, the promoted replica instead of the failed
// master.
func (c *Cluster) Primaries() ([]*Server, error) {
	view, err := c.view()
	if err != nil {
		return nil, err
	}
	var out []*Server
	for _, n := range view {
		if n.has("master") && !n.has("fail") && len(n.slots) > 0 {
			if s := c.byAddr(n.addr); s != nil {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// ReplicaOf is a replica of primary that the cluster does not consider
// failed, or an error if it has none. A node that missed a ping for the
// cluster-node-timeout (1 s WithReplicas) is marked "fail?" until it
// answers again, which a busy machine's descheduling alone can cause: a
// replica so marked is waited for, for a few node timeouts.
func (c *Cluster) ReplicaOf(primary *Server) (*Server, error) {
	id, err := primary.Do("CLUSTER", "MYID")
	if err != nil {
		return nil, fmt.Errorf("redis cluster node %s: %w", primary.Addr(), err)
	}
	var found *Server
	err = proc.Poll(replicaWait, 20*time.Millisecond, func() error {
		view, err := c.view()
		if err != nil {
			return err
		}
		for _, n := range view {
			if n.master == id && !n.has("fail") && !n.has("fail?") {
				if s := c.byAddr(n.addr); s != nil {
					found = s
					return nil
				}
			}
		}
		return fmt.Errorf("redis cluster node %s has no replica", primary.Addr())
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// replicaWait is how long ReplicaOf waits for a replica the cluster does
// not mark failed.
const replicaWait = 10 * time.Second

// Owner is the master that serves slot, as the cluster sees it now.
func (c *Cluster) Owner(slot uint16) (*Server, error) {
	if slot >= 16384 {
		return nil, fmt.Errorf("slot %d out of range 0..16383", slot)
	}
	view, err := c.view()
	if err != nil {
		return nil, err
	}
	return c.ownerIn(view, slot)
}

func (c *Cluster) ownerIn(view []clusterNode, slot uint16) (*Server, error) {
	for _, n := range view {
		if !n.has("master") {
			continue
		}
		for _, r := range n.slots {
			if int(slot) >= r[0] && int(slot) <= r[1] {
				if s := c.byAddr(n.addr); s != nil {
					return s, nil
				}
				return nil, fmt.Errorf("slot %d is served by %s, no node of this cluster", slot, n.addr)
			}
		}
	}
	return nil, fmt.Errorf("slot %d is served by no master", slot)
}

// Failover crashes primary (SIGKILL), as a failed machine does, waits
// until the cluster has promoted a replica of it in its place and every
// running node reports the cluster state ok again, and returns the
// promoted replica. The crashed node stays down; its Restart brings it
// back, and it rejoins as a replica of the promoted one.
func (c *Cluster) Failover(primary *Server) (*Server, error) {
	replica, err := c.ReplicaOf(primary)
	if err != nil {
		return nil, err
	}
	primary.Kill()
	deadline := time.Now().Add(60 * time.Second)
	for {
		role, err := replica.Call("ROLE")
		r, _ := role.([]any)
		if err == nil && len(r) > 0 && r[0] == "master" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("redis cluster: replica %s of %s was not promoted within 60s: %v %v", replica.Addr(), primary.Addr(), err, role)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.WaitHealthy(time.Until(deadline)); err != nil {
		return nil, err
	}
	return replica, nil
}

// WaitHealthy waits until every running, unpaused node reports the
// cluster state ok with every slot served, for at most timeout.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	return proc.WaitHealthy("redis cluster", timeout, 20*time.Millisecond, c.healthy)
}

func (c *Cluster) healthy() error {
	for _, s := range c.nodes {
		if !s.running() {
			continue
		}
		info, err := s.Do("CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("node %s: %w", s.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
			return fmt.Errorf("node %s: cluster state is not ok", s.Addr())
		}
	}
	return nil
}

// MigrateKeysBatch is how many keys MigrateSlot moves with one MIGRATE.
const MigrateKeysBatch = 100

// MigrateSlot moves slot, and its keys, from the master that serves it
// to the master to, while clients keep using it, as Redis Cluster's
// documented resharding does: to imports the slot (CLUSTER SETSLOT
// IMPORTING) and its owner migrates it (SETSLOT MIGRATING), so that a
// client asking the owner for a key already moved is sent to to with an
// ASK redirection; the keys move in batches of MigrateKeysBatch (MIGRATE
// … KEYS); then to, the old owner and every other master are told the
// slot's new owner (SETSLOT NODE). It returns once every running node
// sees to serve the slot.
func (c *Cluster) MigrateSlot(slot uint16, to *Server) error {
	if slot >= 16384 {
		return fmt.Errorf("migrate slot %d: out of range 0..16383", slot)
	}
	if to == nil || c.byAddr(to.Addr()) != to {
		return fmt.Errorf("migrate slot %d: the target is no node of this cluster", slot)
	}
	from, err := c.Owner(slot)
	if err != nil {
		return fmt.Errorf("migrate slot %d: %w", slot, err)
	}
	if from == to {
		return nil
	}
	fromID, err := from.Do("CLUSTER", "MYID")
	if err != nil {
		return fmt.Errorf("migrate slot %d: %s: %w", slot, from.Addr(), err)
	}
	toID, err := to.Do("CLUSTER", "MYID")
	if err != nil {
		return fmt.Errorf("migrate slot %d: %s: %w", slot, to.Addr(), err)
	}
	n := strconv.Itoa(int(slot))
	if _, err := to.Do("CLUSTER", "SETSLOT", n, "IMPORTING", fromID); err != nil {
		return fmt.Errorf("migrate slot %d: %s importing: %w", slot, to.Addr(), err)
	}
	if _, err := from.Do("CLUSTER", "SETSLOT", n, "MIGRATING", toID); err != nil {
		return fmt.Errorf("migrate slot %d: %s migrating: %w", slot, from.Addr(), err)
	}
	host, port := "127.0.0.1", strconv.Itoa(to.port)
	for {
		reply, err := from.Call("CLUSTER", "GETKEYSINSLOT", n, strconv.Itoa(MigrateKeysBatch))
		if err != nil {
			return fmt.Errorf("migrate slot %d: keys: %w", slot, err)
		}
		keys, _ := reply.([]any)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}
		for _, k := range keys {
			key, ok := k.(string)
			if !ok {
				return fmt.Errorf("migrate slot %d: key %#v", slot, k)
			}
			args = append(args, key)
		}
		if _, err := from.Call(args...); err != nil {
			return fmt.Errorf("migrate slot %d: MIGRATE %d keys: %w", slot, len(keys), err)
		}
	}
	// The new owner first, so that the slot is never served by none.
	if _, err := to.Do("CLUSTER", "SETSLOT", n, "NODE", toID); err != nil {
		return fmt.Errorf("migrate slot %d: %s: %w", slot, to.Addr(), err)
	}
	if _, err := from.Do("CLUSTER", "SETSLOT", n, "NODE", toID); err != nil {
		return fmt.Errorf("migrate slot %d: %s: %w", slot, from.Addr(), err)
	}
	primaries, err := c.Primaries()
	if err != nil {
		return fmt.Errorf("migrate slot %d: %w", slot, err)
	}
	for _, p := range primaries {
		if p == to || p == from || !p.running() {
			continue
		}
		if _, err := p.Do("CLUSTER", "SETSLOT", n, "NODE", toID); err != nil {
			return fmt.Errorf("migrate slot %d: %s: %w", slot, p.Addr(), err)
		}
	}
	return c.waitOwner(slot, to, 30*time.Second)
}

// waitOwner waits until every running node sees to serve slot.
func (c *Cluster) waitOwner(slot uint16, to *Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range c.nodes {
		for s.running() {
			text, err := s.Do("CLUSTER", "NODES")
			var owner *Server
			if err == nil {
				var view []clusterNode
				if view, err = parseClusterNodes(text); err == nil {
					owner, err = c.ownerIn(view, slot)
				}
			}
			if owner == to {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("migrate slot %d: node %s does not see %s serve it within %v: %v", slot, s.Addr(), to.Addr(), timeout, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}
