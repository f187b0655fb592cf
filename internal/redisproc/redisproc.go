// Package redisproc runs redis-server processes on free loopback ports, for
// tests, the demo and the benchmarks. It speaks just enough RESP to check
// that a server answers, so it needs no Redis client.
package redisproc

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// InstallHint is the command that installs redis-server on Debian.
const InstallHint = "apt-get update && apt-get install -y redis-server (or run ./scripts/test.sh, which installs it)"

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server not found on PATH; install it with: " + InstallHint)

// Server is a running redis-server process.
type Server struct {
	bin   string
	dir   string
	port  int
	extra []string // more redis-server arguments, e.g. cluster mode
	conf  string   // a configuration file, the first argument (Sentinel); "" for none
	tls   *TLS     // nil: plain text on port
	dial  *tls.Config
	clock *proc.Clock // run under this wrong clock, or nil
	// appendfsync is the policy of the append-only file, "" for none.
	appendfsync AppendFsync

	process // the running server: PID, Pause, Resume, Paused
}

// Available reports whether redis-server is on PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Start runs redis-server on a free loopback port with persistence off,
// keeping its files in dir. Stop it with Kill.
func Start(dir string) (*Server, error) { return StartWith(dir) }

// StartTLS runs redis-server as Start does, speaking TLS only: its
// port is a TLS port (--port 0 --tls-port P), with the certificates of
// t. Server.Do speaks TLS to it with t's client certificate.
func StartTLS(dir string, t TLS) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{bin: bin, dir: dir}
	if err := s.setTLS(t); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	return s.startOnFreePort()
}

// startOnFreePort starts s on a free loopback port, picking another when
// the server fails to start on the one picked.
func (s *Server) startOnFreePort() (*Server, error) {
	if err := proc.OnFreePorts(5, s.start, &s.port); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's turnstile URL: redis://host:port, or for a server
// that speaks TLS rediss://host:port?ca_file=...&cert_file=...&key_file=...
// with the files of its TLS.
func (s *Server) URL() string { return turnstileURL(s.tls, "", []string{s.Addr()}, "") }

// TLS is the TLS of the server, or nil for plain text.
func (s *Server) TLS() *TLS { return s.tls }

// LogPath is the server's log file, which a restart appends to.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

func (s *Server) start() error {
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		port = append([]string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}, s.tls.args()...)
	}
	if s.conf != "" {
		port = append([]string{s.conf}, port...)
	}
	cmd := exec.Command(s.bin, port...)
	cmd.Args = append(cmd.Args,
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--daemonize", "no",
		"--loglevel", "warning",
		"--logfile", s.LogPath(),
	)
	cmd.Args = append(cmd.Args, s.persistence()...)
	cmd.Args = append(cmd.Args, s.extra...)
	if s.clock != nil {
		s.clock.Apply(cmd)
	}
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "redis-server", s.LogPath(), 10*time.Second, 10*time.Millisecond, func() bool { reply, err := s.Do("PING"); return err == nil && reply == "PONG" })
	if err != nil {
		return err
	}
	proc.Started(&s.process, cmd, exited)
	return nil
}

// Restart kills the server and starts it again on the same port: with an
// empty data set, as a restart without persistence does, or, for a server
// started WithAppendOnly, with the data set its append-only file holds.
func (s *Server) Restart() error {
	s.Kill()
	return proc.Restart("redis-server", 50, 20*time.Millisecond, s.start)
}

// Kill stops the server with SIGKILL, waits until it has exited, and then
// until it no longer answers.
func (s *Server) Kill() {
	if !s.process.Kill() {
		return
	}
	for range 1000 {
		if _, err := s.Do("PING"); err != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
