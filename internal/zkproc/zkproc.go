// Package zkproc runs a standalone ZooKeeper server (Debian's zookeeper
// package) on a free loopback port, for tests and benchmarks. It checks
// that the server answers by completing ZooKeeper's connect handshake, so
// it needs no ZooKeeper client.
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
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
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
	java string
	dir  string
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan struct{} // closed once the process has exited
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
func Start(dir string) (*Server, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, ErrNotInstalled
	}
	if _, err := os.Stat(Jar); err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{java: java, dir: dir}
	var lastErr error
	for range 3 {
		if s.port, lastErr = proc.FreePort(); lastErr != nil {
			continue
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start zookeeper: %w", lastErr)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

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
		"maxSessionTimeout=" + strconv.Itoa(int(600*TickTime/time.Millisecond)),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=",
		"forceSync=no",
		"",
	}, "\n")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(s.dir, "zookeeper.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.java,
		"-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", Jar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "zookeeper", logf.Name(), 30*time.Second, 50*time.Millisecond, func() bool { return s.ping() == nil })
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
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
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}
