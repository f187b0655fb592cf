// Package pgproc runs a throw-away PostgreSQL server on a free loopback
// port, for tests and benchmarks. It needs no PostgreSQL client: it waits
// for the server with pg_isready.
package pgproc

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
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
	dir   string
	port  int
	opts  Options
	certs *testcerts.Set
	clock *proc.Clock // run under this wrong clock, or nil

	process // the running server: PID, Pause, Resume, Paused
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

// Options say how StartWith sets the server up. The zero value is what
// Start does: no TLS, every local user trusted.
type Options struct {
	// TLS turns TLS on (ssl=on) with the certificates of a fresh
	// testcerts.Set (see Certs): the server presents its certificate for
	// 127.0.0.1 and localhost, and trusts the set's authority for client
	// certificates.
	TLS bool
	// HostSSLOnly (with TLS) accepts TCP connections over TLS only
	// (hostssl lines in pg_hba.conf): user "client" authenticates with its
	// client certificate (cert), user "postgres" with none (trust), every
	// other user with a SCRAM password (scram-sha-256).
	HostSSLOnly bool
	// Clock runs the server under a wrong wall clock of its own (see
	// proc.Clock and Server.Clock), which the caller moves while the
	// server runs: now(), clock_timestamp() and every timestamp the
	// server takes then read the clock's time. The postmaster's backends
	// inherit the preloaded libfaketime when they are forked, and each
	// rereads the clock's offset on every call, so a jump moves the
	// backends of open sessions too. It needs libfaketime.
	Clock bool
	// SyncCommit makes a commit wait until its WAL is written
	// (synchronous_commit=on, PostgreSQL's default), so that a killed
	// server loses no acknowledged commit, as in production. Without it
	// (synchronous_commit=off, faster for tests) a commit may return
	// before its WAL is written, and a SIGKILL loses the last ones —
	// fault tests that kill the server would then see grants lost that a
	// default server keeps. fsync stays off either way: a killed process
	// leaves what it wrote in the kernel's cache.
	SyncCommit bool
	// LogConnections logs every connection the server receives, each
	// one it authorises and each end of a session (log_connections,
	// log_disconnections), with millisecond timestamps: what a fault test
	// needs to tell a silent server from a silent network.
	LogConnections bool
}

// Start creates a cluster in a new temporary directory and runs postgres
// on a free loopback port, with fsync and synchronous_commit off (see
// Options.SyncCommit). initdb refuses to run as root, so as root the
// server runs as the unprivileged user "postgres" (created by Debian's
// package). Stop it with Kill, which also removes the files.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith is Start with TLS, client authentication, a clock of its own
// and synchronous commits as o says.
func StartWith(o Options) (*Server, error) {
	if o.HostSSLOnly && !o.TLS {
		return nil, errors.New("pgproc: HostSSLOnly needs TLS")
	}
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
	s := &Server{dir: dir, opts: o}
	if o.Clock {
		// In the server's directory, which the server's user can read
		// (the clock's file is readable by all).
		if s.clock, err = proc.NewClock(filepath.Join(dir, "clock")); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if o.TLS {
		if err := s.setUpTLS(data, cred); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	err = proc.OnFreePorts(5, func() error { return s.start(postgres, data, cred) }, &s.port)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return s, nil
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

// LogPath is the server's log file (its standard output and error),
// which a restart appends to. Kill removes it with the server's other
// files.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "postgres.log") }

func (s *Server) start(bin, data string, cred *syscall.Credential) error {
	logPath := s.LogPath()
	logf, err := proc.OpenLog(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-D", data,
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit="+onOff(s.opts.SyncCommit),
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "max_locks_per_transaction=256", // sizes the shared lock table that advisory locks live in
	)
	if s.opts.LogConnections {
		cmd.Args = append(cmd.Args, "-c", "log_connections=on", "-c", "log_disconnections=on")
	}
	if s.certs != nil {
		cmd.Args = append(cmd.Args,
			"-c", "ssl=on",
			"-c", "ssl_cert_file="+s.certs.ServerCert,
			"-c", "ssl_key_file="+s.certs.ServerKey,
			"-c", "ssl_ca_file="+s.certs.CA,
		)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if s.clock != nil {
		s.clock.Apply(cmd)
	}
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "postgres", logPath, 20*time.Second, 20*time.Millisecond, s.ready)
	if err != nil {
		return err
	}
	proc.Started(&s.process, cmd, exited)
	return nil
}

// setUpTLS writes the certificates where the server's user owns them
// (postgres wants its key file private to it: mode 0600, its owner) and,
// for HostSSLOnly, a pg_hba.conf that takes TCP connections over TLS only.
func (s *Server) setUpTLS(data string, cred *syscall.Credential) error {
	certDir := filepath.Join(s.dir, "certs")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return err
	}
	certs, err := testcerts.Write(certDir)
	if err != nil {
		return fmt.Errorf("pgproc: certificates: %w", err)
	}
	if cred != nil {
		for _, p := range []string{certDir, certs.CA, certs.CAKey, certs.ServerCert, certs.ServerKey, certs.ClientCert, certs.ClientKey, certs.OtherCA} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	s.certs = certs
	if !s.opts.HostSSLOnly {
		return nil
	}
	hba := "local all all trust\n" +
		"hostssl all client 127.0.0.1/32 cert\n" +
		"hostssl all postgres 127.0.0.1/32 trust\n" +
		"hostssl all all 127.0.0.1/32 scram-sha-256\n"
	path := filepath.Join(data, "pg_hba.conf")
	if err := os.WriteFile(path, []byte(hba), 0o600); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// Clock is the wrong clock the server runs under (Options.Clock), or nil.
func (s *Server) Clock() *proc.Clock { return s.clock }

// Certs are the certificates of a server started with TLS (the files
// stay until Kill), nil without.
func (s *Server) Certs() *testcerts.Set { return s.certs }

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

// URL is the server's turnstile URL: without TLS for a server started
// without; verified against the server's authority for one with.
func (s *Server) URL() string {
	if s.certs != nil {
		return "postgres://postgres@" + s.Addr() + "/postgres?ca_file=" + url.QueryEscape(s.certs.CA)
	}
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// Kill stops the server with SIGKILL and removes its files.
func (s *Server) Kill() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}

// stop kills the server with SIGKILL and waits until it has exited and
// its port is closed. Backends stopped by Pause, which would outlive the
// postmaster holding its shared memory, are continued first (by
// proc.Process.Kill), to notice its death and exit.
func (s *Server) stop() {
	if s.process.Kill() {
		for range 500 {
			if c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond); err != nil {
				break
			} else {
				_ = c.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// onOff is b as a PostgreSQL boolean setting.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
