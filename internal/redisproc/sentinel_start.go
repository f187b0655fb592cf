package redisproc

import (
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

// startSentinel starts the group StartSentinel, StartSentinelWith and
// StartSentinelTLS describe: the primary, then the replicas, and the
// Sentinels once every replica is in sync.
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

// startMemberConf starts a member with a configuration file, or none
// (""), speaking TLS with t unless t is nil, under
// clock unless it is nil.
func startMemberConf(bin, dir, conf string, t *TLS, clock *proc.Clock, extra []string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, conf: conf, extra: extra, clock: clock}
	if t != nil {
		if err := s.setTLS(*t); err != nil {
			return nil, err
		}
		// Members dial each other (replication, Sentinels' links)
		// with the client certificate: the server's is for servers.
		s.extra = append(slices.Clip(s.extra), "--tls-replication", "yes",
			"--tls-client-cert-file", t.ClientCert, "--tls-client-key-file", t.ClientKey)
	}
	if err := proc.OnFreePorts(5, s.start, &s.port); err != nil {
		return nil, err
	}
	return s, nil
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
