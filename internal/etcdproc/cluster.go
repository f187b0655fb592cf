package etcdproc

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// Cluster is an etcd cluster of several members, one etcd process each,
// on loopback, whose members a fault-injection test pauses, kills and
// restarts (see Server.Pause, Kill and Restart).
type Cluster struct {
	members []*Server
	ids     []uint64 // the members' ids, by index; set at start
}

// A ClusterOption changes how StartCluster runs the members.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	heartbeat, election time.Duration
	link                PeerLink
}

// A PeerLink makes the address at which the other members reach member
// (an index in Members), whose peer port is at addr: a proxy of the
// caller's, or addr itself.
type PeerLink func(member int, addr string) (string, error)

// WithPeerLinks has every member advertise the address link makes for
// its peer port (--initial-advertise-peer-urls; the members' ids and the
// cluster's are made from these), so that every connection dialed to a
// member's peer port goes through the caller's link, while the member
// listens on its own port as without links. Each member dials its own
// streams to every other one and posts its messages to them, so a link
// in front of one member carries traffic both ways between it and the
// others: every raft request names the member that sends it in its
// X-Server-From header (see ID), by which the link can tell them apart.
func WithPeerLinks(link PeerLink) ClusterOption {
	return func(c *clusterConfig) { c.link = link }
}

// WithElection sets the members' heartbeat interval and election timeout
// (--heartbeat-interval, --election-timeout; etcd's defaults are 100 ms
// and 1 s): a follower that hears no heartbeat for election starts an
// election.
func WithElection(heartbeat, election time.Duration) ClusterOption {
	return func(c *clusterConfig) { c.heartbeat, c.election = heartbeat, election }
}

// MaxClusterMembers is the most members StartCluster starts.
const MaxClusterMembers = 7

// StartCluster starts a cluster of members etcd processes on free
// loopback ports (a client and a peer port each), member i with its data
// under dir/member<i>, and returns once every member is healthy and they
// agree on a leader. Stop it with Kill.
func StartCluster(dir string, members int, opts ...ClusterOption) (*Cluster, error) {
	if members < 1 || members > MaxClusterMembers {
		return nil, fmt.Errorf("start etcd cluster: %d members, want 1 to %d", members, MaxClusterMembers)
	}
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.heartbeat < 0 || cfg.election < 0 || (cfg.heartbeat > 0 && cfg.election < 5*cfg.heartbeat) {
		return nil, fmt.Errorf("start etcd cluster: election timeout %v must be at least 5 heartbeats of %v", cfg.election, cfg.heartbeat)
	}
	// The members' ports are in each other's flags: a failed start is
	// retried with every port picked again.
	c, err := proc.StartGroup(dir, members,
		func(i int) string { return "member" + strconv.Itoa(i) },
		func() (*Cluster, error) { return startCluster(dir, members, cfg) })
	if err != nil {
		return nil, fmt.Errorf("start etcd cluster: %w", err)
	}
	return c, nil
}

func startCluster(dir string, members int, cfg clusterConfig) (*Cluster, error) {
	bin, err := lookEtcd()
	if err != nil {
		return nil, err
	}
	var ports proc.Ports
	c := &Cluster{}
	var initial []string
	for i := range members {
		s := &Server{bin: bin, dir: filepath.Join(dir, "member"+strconv.Itoa(i)), name: "member" + strconv.Itoa(i)}
		s.httpc = newHTTPClient()
		if s.clientPort, err = ports.Free(); err != nil {
			return nil, err
		}
		if s.peerPort, err = ports.Free(); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, err
		}
		peer := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.peerPort))
		if cfg.link != nil {
			if peer, err = cfg.link(i, peer); err != nil {
				return nil, fmt.Errorf("link to member %d: %w", i, err)
			}
			if _, _, err := net.SplitHostPort(peer); err != nil {
				return nil, fmt.Errorf("link to member %d: %w", i, err)
			}
			s.advertisePeer = "http://" + peer
		}
		initial = append(initial, s.name+"=http://"+peer)
		c.members = append(c.members, s)
	}
	// A token of this cluster's own keeps members of clusters started
	// earlier on the same ports from talking to these.
	token := "turnstile-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, s := range c.members {
		s.initialCluster = strings.Join(initial, ",")
		s.extra = []string{"--initial-cluster-token", token}
		if cfg.heartbeat > 0 {
			s.extra = append(s.extra,
				"--heartbeat-interval", strconv.FormatInt(cfg.heartbeat.Milliseconds(), 10),
				"--election-timeout", strconv.FormatInt(cfg.election.Milliseconds(), 10))
		}
	}
	// Each member is healthy only once a quorum has elected a leader, so
	// they start together.
	if err := proc.StartAll(c.members, (*Server).start); err != nil {
		c.Kill()
		return nil, err
	}
	c.ids = make([]uint64, members)
	for i, s := range c.members {
		var err error
		if c.ids[i], _, err = s.Status(); err != nil {
			c.Kill()
			return nil, err
		}
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// lookEtcd finds the etcd binary.
func lookEtcd() (string, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return "", ErrNotInstalled
	}
	return bin, nil
}

// newHTTPClient is the client a plain-text member is asked through.
func newHTTPClient() *http.Client { return &http.Client{Timeout: time.Second} }

// Members are the cluster's servers, by index: Leader names one by its
// index, and each is paused, killed and restarted on its own.
func (c *Cluster) Members() []*Server { return c.members }

// ID is member i's id, as etcd names it in hexadecimal in its raft
// requests' X-Server-From header (strconv.FormatUint(id, 16)).
func (c *Cluster) ID(i int) uint64 { return c.ids[i] }

// Addrs are the members' client host:port addresses.
func (c *Cluster) Addrs() []string { return proc.Addrs(c.members) }

// Endpoints are the members' client URLs, http://host:port, as etcd
// clients want them.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, s := range c.members {
		eps[i] = s.Endpoint()
	}
	return eps
}

// URL is the cluster's turnstile URL, etcd://host1:port1,host2:port2,…
// with every member.
func (c *Cluster) URL() string { return "etcd://" + strings.Join(c.Addrs(), ",") }

// Leader is the index in Members of the member the running, unpaused
// members agree is their leader. It is an error when none answers, when
// they name no leader or different ones (during an election), or when
// the leader they name is not running.
func (c *Cluster) Leader() (int, error) {
	var leader uint64
	asked := 0
	for i, s := range c.members {
		if s.PID() == 0 || s.Paused() {
			continue
		}
		_, l, err := s.Status()
		if err != nil {
			return -1, fmt.Errorf("etcd member %d: %w", i, err)
		}
		if l == 0 {
			return -1, fmt.Errorf("etcd member %d has no leader", i)
		}
		if asked > 0 && l != leader {
			return -1, fmt.Errorf("etcd members disagree on the leader (%x, %x)", leader, l)
		}
		leader = l
		asked++
	}
	if asked == 0 {
		return -1, errors.New("no etcd member is running")
	}
	for i, id := range c.ids {
		if id == leader {
			if c.members[i].PID() == 0 || c.members[i].Paused() {
				return -1, fmt.Errorf("etcd members still follow member %d, which is down", i)
			}
			return i, nil
		}
	}
	return -1, fmt.Errorf("etcd leader %x is no member of this cluster", leader)
}

// WaitHealthy waits until every running, unpaused member reports itself
// healthy and they agree on a running leader, for at most timeout.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	return proc.WaitHealthy("etcd cluster", timeout, 50*time.Millisecond, c.healthy)
}

func (c *Cluster) healthy() error {
	for i, s := range c.members {
		if s.PID() == 0 || s.Paused() {
			continue
		}
		if !s.healthy() {
			return fmt.Errorf("etcd member %d is not healthy", i)
		}
	}
	_, err := c.Leader()
	return err
}

// Kill stops every member with SIGKILL.
func (c *Cluster) Kill() { proc.KillAll(c.members) }
