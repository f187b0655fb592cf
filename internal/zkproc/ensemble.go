package zkproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// Ensemble is a replicated ZooKeeper service of several servers, one JVM
// each, on loopback, whose members a fault-injection test pauses, kills
// and restarts (see Server.Pause, Kill and Restart).
type Ensemble struct {
	members []*Server
}

// ensembleMember is what a server of an ensemble has besides a
// standalone one's.
type ensembleMember struct {
	id                     int // myid, from 1
	peerPort, electionPort int
	servers                []string    // the zoo.cfg server.N lines of every member
	clock                  *proc.Clock // run under this wrong clock, or nil
}

// An EnsembleOption changes how StartEnsemble runs the servers.
type EnsembleOption func(*ensembleConfig)

type ensembleConfig struct {
	clocks bool
	link   LinkFunc
}

// A LinkFunc makes the address server from (an index in Members) dials
// to reach addr, a port of server to: a proxy of the caller's for that
// pair and direction, or addr itself.
type LinkFunc func(from, to int, addr string) (string, error)

// WithLinks has every server reach every other one's quorum and election
// ports at the addresses link makes for the pair (server i's zoo.cfg
// names them in server j's line), so that the caller can cut one pair
// of servers apart, in one direction or both, while clients still reach
// every server. Each server listens on its own ports as without links.
// A ZooKeeper server keeps its connections to another one in one
// direction only (for elections, from the larger myid; a follower's to
// its leader): to cut two servers apart, cut both directions. A server
// that dials another's election port first sends its myid and its own
// election address, and a server with a larger myid closes that
// connection and dials the address it was sent — directly, not through
// a link, unless the caller's link rewrites it.
func WithLinks(link LinkFunc) EnsembleOption {
	return func(c *ensembleConfig) { c.link = link }
}

// WithClocks runs every server under a wrong clock of its own (see
// proc.Clock and Server.Clock), which the caller moves while it runs.
// It needs libfaketime, and slows the JVMs down (each clock call reads
// the clock's offset file): use it for the tests of wrong clocks.
func WithClocks() EnsembleOption { return func(c *ensembleConfig) { c.clocks = true } }

// MaxEnsembleServers is the most servers StartEnsemble starts.
const MaxEnsembleServers = 7

// StartEnsemble starts servers ZooKeeper servers on free loopback ports
// (a client, a quorum and an election port each) that form one ensemble,
// server i (myid i+1) with its data under dir/server<i+1>, with the
// admin server off and the four-letter word srvr allowed, and returns
// once each grants sessions and one of them leads. Stop it with Kill.
func StartEnsemble(dir string, servers int, opts ...EnsembleOption) (*Ensemble, error) {
	if servers < 1 || servers > MaxEnsembleServers {
		return nil, fmt.Errorf("start zookeeper ensemble: %d servers, want 1 to %d", servers, MaxEnsembleServers)
	}
	var cfg ensembleConfig
	for _, o := range opts {
		o(&cfg)
	}
	// Every server's ports are in every server's zoo.cfg: a failed start
	// is retried with every port picked again.
	e, err := proc.StartGroup(dir, servers,
		func(i int) string { return "server" + strconv.Itoa(i+1) },
		func() (*Ensemble, error) { return startEnsemble(dir, servers, cfg) })
	if err != nil {
		return nil, fmt.Errorf("start zookeeper ensemble: %w", err)
	}
	return e, nil
}

func startEnsemble(dir string, n int, cfg ensembleConfig) (*Ensemble, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, ErrNotInstalled
	}
	if _, err := os.Stat(Jar); err != nil {
		return nil, ErrNotInstalled
	}
	var ports proc.Ports
	e := &Ensemble{}
	for i := range n {
		m := &ensembleMember{id: i + 1}
		s := &Server{java: java, dir: filepath.Join(dir, "server"+strconv.Itoa(m.id)), member: m}
		for _, p := range []*int{&s.port, &m.peerPort, &m.electionPort} {
			if *p, err = ports.Free(); err != nil {
				return nil, err
			}
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o700); err != nil {
			return nil, err
		}
		if cfg.clocks {
			if m.clock, err = proc.NewClock(filepath.Join(s.dir, "clock")); err != nil {
				return nil, err
			}
		}
		e.members = append(e.members, s)
	}
	for i, s := range e.members {
		lines, err := serverLines(e.members, i, cfg.link)
		if err != nil {
			return nil, err
		}
		s.member.servers = lines
	}
	// A server grants sessions only once a quorum has formed, so they
	// start together.
	if err := proc.StartAll(e.members, (*Server).startMember); err != nil {
		e.Kill()
		return nil, err
	}
	if err := e.WaitHealthy(30 * time.Second); err != nil {
		e.Kill()
		return nil, err
	}
	return e, nil
}

// serverLines are the zoo.cfg server.N lines of server from: its own
// ports, and the other servers' ports as link makes them for it.
func serverLines(members []*Server, from int, link LinkFunc) ([]string, error) {
	var lines []string
	for to, s := range members {
		m := s.member
		quorum := net.JoinHostPort("127.0.0.1", strconv.Itoa(m.peerPort))
		election := net.JoinHostPort("127.0.0.1", strconv.Itoa(m.electionPort))
		if link != nil && to != from {
			var err error
			if quorum, err = link(from, to, quorum); err != nil {
				return nil, fmt.Errorf("link from server %d to server %d: %w", from+1, to+1, err)
			}
			if election, err = link(from, to, election); err != nil {
				return nil, fmt.Errorf("link from server %d to server %d: %w", from+1, to+1, err)
			}
		}
		qh, qp, err := net.SplitHostPort(quorum)
		if err != nil {
			return nil, fmt.Errorf("link from server %d to server %d: %w", from+1, to+1, err)
		}
		eh, ep, err := net.SplitHostPort(election)
		if err != nil {
			return nil, fmt.Errorf("link from server %d to server %d: %w", from+1, to+1, err)
		}
		if qh != eh {
			return nil, fmt.Errorf("link from server %d to server %d: quorum port on %s, election port on %s: ZooKeeper wants one host", from+1, to+1, qh, eh)
		}
		lines = append(lines, fmt.Sprintf("server.%d=%s:%s:%s", m.id, qh, qp, ep))
	}
	return lines, nil
}

// SimpleLoggerJar is SLF4J's simple binding (Debian's libslf4j-java),
// which an ensemble's servers log through when it is installed, with
// millisecond timestamps: ZooKeeper's jar brings no binding, and without
// one its servers log nothing.
const SimpleLoggerJar = "/usr/share/java/slf4j-simple.jar"

// startMember starts a server of an ensemble and waits until it grants
// sessions.
func (s *Server) startMember() error {
	m := s.member
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(m.id)+"\n"), 0o600); err != nil {
		return err
	}
	conf := append([]string{
		"tickTime=" + strconv.Itoa(int(TickTime/time.Millisecond)),
		// A follower has 5 s to sync with a new leader, and is dropped
		// after 2 s without hearing from it: long enough for a busy
		// machine's pauses, short enough for a test's failover.
		"initLimit=25",
		"syncLimit=10",
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(s.port),
		"clientPortAddress=127.0.0.1",
		"maxSessionTimeout=" + strconv.Itoa(int(600*TickTime/time.Millisecond)),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr",
		"forceSync=no",
	}, m.servers...)
	cfg := filepath.Join(s.dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	logf, err := proc.OpenLog(s.LogPath())
	if err != nil {
		return err
	}
	defer logf.Close()
	classpath := Jar
	if _, err := os.Stat(SimpleLoggerJar); err == nil {
		classpath += ":" + SimpleLoggerJar
	}
	cmd := exec.Command(s.java,
		"-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
		"-cp", classpath,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if m.clock != nil {
		m.clock.Apply(cmd)
	}
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "zookeeper server "+strconv.Itoa(m.id), logf.Name(), 60*time.Second, 50*time.Millisecond, func() bool { return s.ping() == nil })
	if err != nil {
		return err
	}
	proc.Started(&s.process, cmd, exited)
	return nil
}

// Clock is the wrong clock a server of an ensemble started WithClocks
// runs under, or nil.
func (s *Server) Clock() *proc.Clock {
	if s.member == nil {
		return nil
	}
	return s.member.clock
}

// Mode is what the server says it is in its answer to the four-letter
// word srvr: "leader", "follower", "observer" or "standalone". A server
// of an ensemble must be running and in a quorum to answer. (Standalone
// servers that Start runs allow no four-letter words.)
func (s *Server) Mode() (string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(io.LimitReader(conn, 16<<10))
	var first string
	for sc.Scan() {
		line := sc.Text()
		if first == "" {
			first = line
		}
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("zookeeper %s: no mode in the answer to srvr: %q", s.Addr(), first)
}

// Members are the ensemble's servers, by index (server i has myid i+1):
// Leader names one by its index, and each is paused, killed and
// restarted on its own.
func (e *Ensemble) Members() []*Server { return e.members }

// Addrs are the servers' client host:port addresses.
func (e *Ensemble) Addrs() []string { return proc.Addrs(e.members) }

// ConnectString is ZooKeeper's connect string of the ensemble,
// host1:port1,host2:port2,…
func (e *Ensemble) ConnectString() string { return strings.Join(e.Addrs(), ",") }

// URL is the ensemble's turnstile URL, zookeeper://host1:port1,host2:port2,…
func (e *Ensemble) URL() string { return "zookeeper://" + e.ConnectString() }

// Leader is the index in Members of the server that says it leads (srvr's
// Mode: leader), among the running, unpaused ones. It is an error when
// none does (during an election) or when two do.
func (e *Ensemble) Leader() (int, error) {
	leader := -1
	var errs []error
	for i, s := range e.members {
		if s.PID() == 0 || s.Paused() {
			continue
		}
		mode, err := s.Mode()
		if err != nil {
			errs = append(errs, fmt.Errorf("server %d: %w", i+1, err))
			continue
		}
		if mode != "leader" {
			continue
		}
		if leader >= 0 {
			return -1, fmt.Errorf("zookeeper servers %d and %d both lead", leader+1, i+1)
		}
		leader = i
	}
	if leader < 0 {
		return -1, fmt.Errorf("no zookeeper server leads: %w", errors.Join(errs...))
	}
	return leader, nil
}

// WaitHealthy waits until every running, unpaused server grants sessions
// and one of them leads, for at most timeout.
func (e *Ensemble) WaitHealthy(timeout time.Duration) error {
	return proc.WaitHealthy("zookeeper ensemble", timeout, 50*time.Millisecond, e.healthy)
}

func (e *Ensemble) healthy() error {
	for i, s := range e.members {
		if s.PID() == 0 || s.Paused() {
			continue
		}
		if err := s.ping(); err != nil {
			return fmt.Errorf("server %d: %w", i+1, err)
		}
	}
	_, err := e.Leader()
	return err
}

// Kill stops every server with SIGKILL.
func (e *Ensemble) Kill() { proc.KillAll(e.members) }
