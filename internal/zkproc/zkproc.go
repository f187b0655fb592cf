// Package zkproc runs a standalone ZooKeeper server (Debian's zookeeper
// package) on a free loopback port, for tests and benchmarks, optionally
// with a second, TLS-only client port (secureClientPort, served by
// Netty) that wants client certificates. It checks that the server
// answers by completing ZooKeeper's connect handshake on the plain port,
// so it needs no ZooKeeper client.
package zkproc

import (
	"encoding/binary"
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
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// InstallHint is the command that installs the ZooKeeper server on Debian.
const InstallHint = "apt-get install -y zookeeper (or run ./scripts/test.sh, which installs it)"

// Jar is where Debian's zookeeper package puts the server; its manifest
// names every other jar the server needs.
const Jar = "/usr/share/java/zookeeper.jar"

// ErrNotInstalled means java or the ZooKeeper jar is missing.
var ErrNotInstalled = errors.New("zookeeper server not found (" + Jar + " and java); install it with: " + InstallHint)

// TickTime is the server's tick. Sessions may last from 2 to 600 ticks,
// so tests can use session timeouts from 400 ms to 2 minutes.
const TickTime = 200 * time.Millisecond

// Server is a running standalone ZooKeeper server.
type Server struct {
	java    string
	dir     string
	port    int
	tlsPort int            // secureClientPort, or 0
	certs   *testcerts.Set // of the TLS port, or nil
	opts    Options

	// member is set for a server of an ensemble (StartEnsemble), nil
	// for a standalone one.
	member *ensembleMember

	process // the running server: PID, Pause, Resume, Paused
}

// Available reports whether java and the ZooKeeper jar are installed.
func Available() bool {
	_, err := exec.LookPath("java")
	_, jerr := os.Stat(Jar)
	return err == nil && jerr == nil
}

// Start runs a standalone ZooKeeper server on a free loopback port with
// its data in dir, the admin server and four-letter words off. Stop it
// with Kill.
func Start(dir string) (*Server, error) { return start(dir, nil, Options{}) }

// Options change how StartWith runs a standalone server.
type Options struct {
	// MaxSessionTimeout caps the session timeout the server grants
	// (zoo.cfg's maxSessionTimeout), as a production server's does: a
	// client that asks for more gets this. Zero means 600 ticks
	// (2 minutes). It must be at least 2 ticks, the shortest session
	// the server grants.
	MaxSessionTimeout time.Duration
}

// StartWith runs a standalone server as Start does, configured by o.
func StartWith(dir string, o Options) (*Server, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return start(dir, nil, o)
}

func (o Options) check() error {
	if o.MaxSessionTimeout != 0 && o.MaxSessionTimeout < 2*TickTime {
		return fmt.Errorf("zkproc: MaxSessionTimeout %v is shorter than the shortest session the server grants, %v", o.MaxSessionTimeout, 2*TickTime)
	}
	return nil
}

// maxSession is zoo.cfg's maxSessionTimeout, in milliseconds.
func (o Options) maxSession() string {
	d := o.MaxSessionTimeout
	if d == 0 {
		d = 600 * TickTime
	}
	return strconv.Itoa(int(d / time.Millisecond))
}

// SetOptions changes the options a standalone server runs with from its
// next Restart on, as an operator who edits zoo.cfg and restarts the
// server does; the data, and so the sessions, survive the restart.
func (s *Server) SetOptions(o Options) error {
	if s.member != nil {
		return errors.New("zkproc: SetOptions is for a standalone server, not a member of an ensemble")
	}
	if err := o.check(); err != nil {
		return err
	}
	s.opts = o
	return nil
}

// StartTLS runs a standalone server as Start does, with a second client
// port, TLSAddr, that speaks TLS only (secureClientPort, with Netty's
// server connection factory on both ports), presenting certs' server
// certificate and requiring client certificates signed by certs'
// authority (ssl.clientAuth=need).
func StartTLS(dir string, certs *testcerts.Set) (*Server, error) {
	if certs == nil {
		return nil, errors.New("zkproc: StartTLS without certificates")
	}
	return start(dir, certs, Options{})
}

func start(dir string, certs *testcerts.Set, o Options) (*Server, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, ErrNotInstalled
	}
	if _, err := os.Stat(Jar); err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{java: java, dir: dir, certs: certs, opts: o}
	ports := []*int{&s.port}
	if certs != nil {
		ports = append(ports, &s.tlsPort)
	}
	if err := proc.OnFreePorts(3, s.start, ports...); err != nil {
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	return s, nil
}

// Addr is the server's plain-text host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// TLSAddr is the host:port of the TLS port of a server that StartTLS
// started, or "".
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// Certs are the certificates of a server that StartTLS started, or nil.
func (s *Server) Certs() *testcerts.Set { return s.certs }

// TLSConfig are the zoo.cfg lines of a secureClientPort on 127.0.0.1 at
// port, with the server's key and certificate in keyStore (one PEM file)
// and the authorities of its clients in trustStore (PEM), requiring
// client certificates.
func TLSConfig(port int, keyStore, trustStore string) []string {
	return []string{
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
		"secureClientPort=" + strconv.Itoa(port),
		"secureClientPortAddress=127.0.0.1",
		"ssl.keyStore.location=" + keyStore,
		"ssl.keyStore.type=PEM",
		"ssl.trustStore.location=" + trustStore,
		"ssl.trustStore.type=PEM",
		"ssl.clientAuth=need",
	}
}

// nettyJars are the Netty jars the server's TLS port needs besides those
// zookeeper.jar's manifest names.
var nettyJars = []string{"/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar", "/usr/share/java/netty-transport-native-unix-common.jar"}

// LogPath is the server's log file (its standard output and error),
// which a restart appends to.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "zookeeper.log") }

func (s *Server) start() error {
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	cfg := filepath.Join(s.dir, "zoo.cfg")
	conf := strings.Join([]string{
		"tickTime=" + strconv.Itoa(int(TickTime/time.Millisecond)),
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(s.port),
		"clientPortAddress=127.0.0.1",
		"maxSessionTimeout=" + s.opts.maxSession(),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=",
		"forceSync=no",
	}, "\n") + "\n"
	classpath := Jar
	if s.certs != nil {
		keyStore := filepath.Join(s.dir, "keystore.pem")
		key, err := os.ReadFile(s.certs.ServerKey)
		if err != nil {
			return err
		}
		cert, err := os.ReadFile(s.certs.ServerCert)
		if err != nil {
			return err
		}
		if err := os.WriteFile(keyStore, append(key, cert...), 0o600); err != nil {
			return err
		}
		conf += strings.Join(TLSConfig(s.tlsPort, keyStore, s.certs.CA), "\n") + "\n"
		for _, j := range nettyJars {
			if _, err := os.Stat(j); err != nil {
				return fmt.Errorf("%s is missing for ZooKeeper's TLS port; install it with: apt-get install -y libnetty-java", j)
			}
		}
		classpath += ":" + strings.Join(nettyJars, ":")
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	logf, err := proc.OpenLog(s.LogPath())
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.java,
		"-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", classpath,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "zookeeper", logf.Name(), 30*time.Second, 50*time.Millisecond, func() bool { return s.ping() == nil })
	if err != nil {
		return err
	}
	proc.Started(&s.process, cmd, exited)
	return nil
}

// ping opens a session with ZooKeeper's connect handshake and checks that
// the server grants one.
func (s *Server) ping() error {
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd (length-prefixed), framed by a 4-byte length.
	req := make([]byte, 4+4+8+4+8+4+16)
	binary.BigEndian.PutUint32(req[0:], uint32(len(req)-4))
	binary.BigEndian.PutUint32(req[16:], 2000)
	binary.BigEndian.PutUint32(req[28:], 16)
	if _, err := conn.Write(req); err != nil {
		return err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return err
	}
	resp := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(conn, resp); err != nil {
		return err
	}
	if len(resp) < 16 || binary.BigEndian.Uint64(resp[8:]) == 0 {
		return errors.New("zookeeper granted no session")
	}
	return nil
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() { s.process.Kill() }
