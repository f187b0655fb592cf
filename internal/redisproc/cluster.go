package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// clusterBusOffset is how far above its client port a cluster node opens
// its cluster bus port, which redis-cli --cluster create relies on.
const clusterBusOffset = 10000

// Cluster is a Redis Cluster of masters, without replicas or (started
// WithReplicas) with them, one redis-server process each, on loopback.
type Cluster struct {
	nodes []*Server
	tls   *TLS // nil: plain text
}

// StartCluster starts masters cluster-enabled redis-server processes with
// persistence off, keeping their files under dir, joins them into one
// cluster with redis-cli --cluster create, and returns once every node
// reports the cluster healthy with all 16384 slots served. Stop it with
// Kill.
func StartCluster(dir string, masters int) (*Cluster, error) {
	return startCluster(dir, masters, nil, clusterConfig{})
}

// StartClusterTLS starts a cluster as StartCluster does, whose nodes
// speak TLS only, to clients and to each other: each node runs with
// --port 0 --tls-port P --tls-cluster yes --tls-replication yes and the
// certificates of t, the client certificate for their connections to
// each other (--tls-client-cert-file, --tls-client-key-file).
func StartClusterTLS(dir string, masters int, t TLS) (*Cluster, error) {
	return startCluster(dir, masters, &t, clusterConfig{})
}

func startCluster(dir string, masters int, t *TLS, cfg clusterConfig) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("start redis cluster: %d masters, Redis Cluster needs at least 3", masters)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH; install it with: %s", InstallHint)
	}
	c := &Cluster{tls: t}
	for i := range masters * (1 + cfg.replicas) {
		s, err := startClusterNode(bin, filepath.Join(dir, "node"+strconv.Itoa(i)), t, cfg)
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.create(cli, cfg.replicas); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// startClusterNode starts one node in a directory of its own. A port that
// was free when picked may be taken by the time the server binds it (and
// the bus port with it), so a failed start is retried on other ports.
func startClusterNode(bin, dir string, t *TLS, cfg clusterConfig) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 10 {
		port, err := freeClusterPort()
		if err != nil {
			lastErr = err
			continue
		}
		s := &Server{bin: bin, dir: dir, port: port, extra: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		}}
		if err := cfg.apply(s); err != nil {
			return nil, fmt.Errorf("start cluster node: %w", err)
		}
		if t != nil {
			if err := s.setTLS(*t); err != nil {
				return nil, fmt.Errorf("start cluster node: %w", err)
			}
			// Nodes dial each other with the client certificate: the
			// server's is for servers only.
			s.extra = append(s.extra, "--tls-cluster", "yes", "--tls-replication", "yes",
				"--tls-client-cert-file", t.ClientCert, "--tls-client-key-file", t.ClientKey)
		}
		// A failed attempt may have written a node id; a fresh node needs none.
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start cluster node: %w", lastErr)
}

// freeClusterPort returns a loopback port that is free, and whose cluster
// bus port is free too.
func freeClusterPort() (int, error) {
	for range 100 {
		port, err := proc.FreePort()
		if err != nil {
			return 0, err
		}
		if port+clusterBusOffset > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBusOffset)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair (port, port+10000) on loopback")
}

// create assigns the slots and introduces the nodes to each other, then
// waits until every node agrees that the cluster is up: redis-cli returns
// as soon as the configuration is consistent, which can be before every
// node has marked every slot served.
func (c *Cluster) create(cli string, replicas int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var args []string
	if c.tls != nil {
		args = []string{"--tls", "--cacert", c.tls.CA, "--cert", c.tls.ClientCert, "--key", c.tls.ClientKey}
	}
	args = append(args, "--cluster", "create")
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w: %s", err, strings.TrimSpace(string(out)))
	}
	for _, s := range c.nodes {
		for {
			info, err := s.Do("CLUSTER", "INFO")
			if err == nil && clusterReady(info, len(c.nodes)) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("redis cluster node %s not ready within 60s: %v %s", s.Addr(), err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if replicas > 0 {
		return c.waitReplicasInSync(ctx)
	}
	return nil
}

// clusterReady reads CLUSTER INFO: the state is ok, every slot is served,
// and the node knows every other node.
func clusterReady(info string, nodes int) bool {
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    "16384",
		"cluster_known_nodes": strconv.Itoa(nodes),
	}
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if w, ok := want[k]; ok {
			if v != w {
				return false
			}
			delete(want, k)
		}
	}
	return len(want) == 0
}

// Addrs are the nodes' host:port addresses.
func (c *Cluster) Addrs() []string { return proc.Addrs(c.nodes) }

// URL is the cluster's turnstile URL, redis://host1:port1,host2:port2,...
// or for a cluster that speaks TLS rediss://host1:port1,...?ca_file=...&cert_file=...&key_file=...
func (c *Cluster) URL() string { return turnstileURL(c.tls, "", c.Addrs(), "") }

// Do sends one command to the first node, as Server.Do does: for commands
// any node answers alike, such as CLUSTER KEYSLOT or CLUSTER INFO. Key
// commands need a cluster-aware client, which follows redirections.
func (c *Cluster) Do(args ...string) (string, error) { return c.nodes[0].Do(args...) }

// Kill stops every node with SIGKILL.
func (c *Cluster) Kill() { proc.KillAll(c.nodes) }

// Nodes are the cluster's servers, for commands to one node.
func (c *Cluster) Nodes() []*Server { return c.nodes }
