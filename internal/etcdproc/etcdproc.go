// Package etcdproc runs single-member etcd servers on free loopback ports,
// for tests and benchmarks. It checks health over etcd's HTTP /health
// endpoint, so it needs no etcd client.
package etcdproc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// InstallHint is the command that installs etcd on Debian.
const InstallHint = "apt-get install -y etcd-server (or run ./scripts/test.sh)"

// ErrNotInstalled means etcd is not on PATH.
var ErrNotInstalled = errors.New("etcd not found on PATH; install it with: " + InstallHint)

// Server is a running etcd process.
type Server struct {
	bin        string
	dir        string
	clientPort int
	peerPort   int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan struct{} // closed once the process has exited
}

// Available reports whether etcd is on PATH.
func Available() bool {
	_, err := exec.LookPath("etcd")
	return err == nil
}

// Start runs a single-member etcd on two free loopback ports (client and
// peer) with its data in dir. Stop it with Kill.
func Start(dir string) (*Server, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{bin: bin, dir: dir}
	var lastErr error
	for range 5 {
		if s.clientPort, lastErr = proc.FreePort(); lastErr != nil {
			continue
		}
		if s.peerPort, lastErr = proc.FreePort(); lastErr != nil || s.peerPort == s.clientPort {
			continue
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start etcd: %w", lastErr)
}

// Addr is the client host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort)) }

// Endpoint is the client URL, http://host:port, as etcd clients want it.
func (s *Server) Endpoint() string { return "http://" + s.Addr() }

// URL is the server's turnstile URL, etcd://host:port.
func (s *Server) URL() string { return "etcd://" + s.Addr() }

func (s *Server) start() error {
	client := s.Endpoint()
	peer := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.peerPort))
	logPath := filepath.Join(s.dir, "etcd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin,
		"--name", "turnstile-test",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "turnstile-test="+peer,
		"--initial-cluster-state", "new",
		"--logger", "zap",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "etcd", logPath, 20*time.Second, 20*time.Millisecond, s.healthy)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// healthy asks etcd's /health endpoint, which answers true once the
// member has a leader and serves requests.
func (s *Server) healthy() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(s.Endpoint() + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	c.CloseIdleConnections()
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"health":"true"`)
}

// Kill stops the server with SIGKILL and waits until it has exited.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}
