// Package pgproc runs a throw-away PostgreSQL server on a free loopback
// port, for tests and benchmarks. It needs no PostgreSQL client: it waits
// for the server with pg_isready.
package pgproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// InstallHint is the command that installs PostgreSQL on Debian.
const InstallHint = "apt-get install -y postgresql (or run ./scripts/test.sh, which installs it)"

// ErrNotInstalled means initdb and postgres were not found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found; install them with: " + InstallHint)

// searchDirs are where Debian and source builds put the server binaries,
// which are not on PATH in Debian's package.
var searchDirs = []string{"/usr/local/bin", "/usr/local/pgsql/bin", "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}

// Server is a running postgres process with a database "postgres" that
// user "postgres" may use without a password.
type Server struct {
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range searchDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// Start creates a cluster in a new temporary directory and runs postgres
// on a free loopback port, with fsync off. initdb refuses to run as root,
// so as root the server runs as the unprivileged user "postgres" (created
// by Debian's package). Stop it with Kill, which also removes the files.
func Start() (*Server, error) {
	initdb, err := lookPath("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := lookPath("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "turnstile-pg-")
	if err != nil {
		return nil, err
	}
	cred, err := credential(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-N", "-E", "UTF8", "--locale=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	proc.DieWithParent(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	s := &Server{dir: dir}
	var lastErr error
	for range 5 {
		if s.port, lastErr = proc.FreePort(); lastErr != nil {
			continue
		}
		if lastErr = s.start(postgres, data, cred); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start postgres: %w", lastErr)
}

// credential returns the user to run the server as, nil for the current
// one, and hands dir to that user.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root; need user postgres: %w (%s)", err, InstallHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) start(bin, data string, cred *syscall.Credential) error {
	logPath := filepath.Join(s.dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-D", data,
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "max_locks_per_transaction=256", // sizes the shared lock table that advisory locks live in
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	proc.DieWithParent(cmd)
	_, err = proc.Start(cmd, "postgres", logPath, 20*time.Second, 20*time.Millisecond, s.ready)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

// ready reports whether the server accepts connections.
func (s *Server) ready() bool {
	if isready, err := lookPath("pg_isready"); err == nil {
		return exec.Command(isready, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres").Run() == nil
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's turnstile URL.
func (s *Server) URL() string { return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable" }

// Kill stops the server with SIGKILL and removes its files.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		for range 500 {
			if c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond); err != nil {
				break
			} else {
				_ = c.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	_ = os.RemoveAll(s.dir)
}
