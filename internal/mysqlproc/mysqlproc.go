// Package mysqlproc runs private MariaDB (or MySQL) server processes on free
// loopback ports, for tests and benchmarks. It sets them up with the
// mariadb command-line client, so it needs no Go MySQL driver.
package mysqlproc

import (
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
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// InstallHint is the command that installs MariaDB on Debian.
const InstallHint = "apt-get update && apt-get install -y mariadb-server (or run ./scripts/test.sh, which installs it)"

// ErrNotInstalled means mariadbd or its tools are not on PATH.
var ErrNotInstalled = errors.New("mariadbd not found on PATH; install it with: " + InstallHint)

// User, Password and Database are what Start creates for clients: a user
// with a password, over TCP, with every privilege on one database.
const (
	User     = "turnstile"
	Password = "turnstile-test"
	Database = "turnstile"
)

// Server is a running mariadbd process.
type Server struct {
	dir     string // data directory
	sock    string // unix socket for the root set-up connection
	tmp     string // the server's temporary directory, beside sock
	port    int
	bins    map[string]string
	certs   *testcerts.Set
	clock   *proc.Clock // run under this wrong clock, or nil
	process             // the running server: PID, Pause, Resume, Paused
}

// Available reports whether the server and its tools are on PATH.
func Available() bool {
	_, err := lookAll()
	return err == nil
}

func lookAll() (map[string]string, error) {
	bins := map[string]string{}
	for _, n := range []string{"mariadbd", "mariadb-install-db", "mariadb"} {
		p, err := exec.LookPath(n)
		if err != nil {
			if n == "mariadbd" { // Debian puts it in /usr/sbin
				if _, err := os.Stat("/usr/sbin/mariadbd"); err == nil {
					bins[n] = "/usr/sbin/mariadbd"
					continue
				}
			}
			return nil, ErrNotInstalled
		}
		bins[n] = p
	}
	return bins, nil
}

// Options say how StartWith sets a server up. The zero value is what
// Start does: no TLS.
type Options struct {
	// TLS turns TLS on (--ssl-cert, --ssl-key, --ssl-ca) with the
	// certificates of a fresh testcerts.Set, written under dir (see
	// Certs): the server presents its certificate for 127.0.0.1 and
	// localhost and verifies client certificates against the set's
	// authority, for accounts that REQUIRE X509. Accounts without a
	// REQUIRE clause may still connect in plain text.
	TLS bool
	// Clock runs the server under a wrong wall clock of its own (see
	// proc.Clock and Server.Clock), whose file is dir/clock, and which
	// the caller moves while the server runs: NOW(6), SYSDATE(6) and
	// UNIX_TIMESTAMP() then read the clock's time, in every session (the
	// sessions are threads of the one server process). It needs
	// libfaketime.
	Clock bool
}

// Start initialises a data directory under dir, runs mariadbd on a free
// loopback port and creates User and Database. Stop it with Kill.
func Start(dir string) (*Server, error) { return StartWith(dir, Options{}) }

// StartWith is Start with TLS as o says.
func StartWith(dir string, o Options) (*Server, error) {
	bins, err := lookAll()
	if err != nil {
		return nil, err
	}
	var clock *proc.Clock
	if o.Clock {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if clock, err = proc.NewClock(filepath.Join(dir, "clock")); err != nil {
			return nil, err
		}
	}
	var certs *testcerts.Set
	if o.TLS {
		certDir := filepath.Join(dir, "certs")
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		if certs, err = testcerts.Write(certDir); err != nil {
			return nil, fmt.Errorf("mysqlproc: certificates: %w", err)
		}
	}
	// Unix socket paths are limited to about 100 bytes; test temp dirs can
	// be longer.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		return nil, err
	}
	// A temporary directory of the server's own: a server starting
	// removes every temporary file ("#sql…") it finds in its own, and in
	// a shared one (/tmp) it would remove those of the servers that run,
	// or initialise their data, beside it.
	tmp := filepath.Join(sockDir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, err
	}
	s := &Server{dir: filepath.Join(dir, "data"), sock: filepath.Join(sockDir, "sock"), tmp: tmp, bins: bins, certs: certs, clock: clock}
	// Arguments mariadb-install-db does not know go to the mariadbd it
	// runs (--tmpdir).
	install := exec.Command(bins["mariadb-install-db"], "--no-defaults", "--datadir="+s.dir,
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+tmp)
	if out, err := install.CombinedOutput(); err != nil {
		s.Remove()
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, out)
	}
	if err := proc.OnFreePorts(5, s.start, &s.port); err != nil {
		s.Remove()
		return nil, fmt.Errorf("start mariadbd: %w", err)
	}
	setup := fmt.Sprintf("CREATE DATABASE %s; CREATE USER '%s'@'%%' IDENTIFIED BY '%s'; "+
		"GRANT ALL ON %s.* TO '%s'@'%%'; GRANT PROCESS, CONNECTION ADMIN ON *.* TO '%s'@'%%';",
		Database, User, Password, Database, User, User)
	if _, err := s.Exec(setup); err != nil {
		s.Kill()
		s.Remove()
		return nil, fmt.Errorf("set up mariadbd: %w", err)
	}
	return s, nil
}

// Clock is the wrong clock the server runs under (Options.Clock), or nil.
func (s *Server) Clock() *proc.Clock { return s.clock }

// Certs are the certificates of a server started with TLS, nil without.
func (s *Server) Certs() *testcerts.Set { return s.certs }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's turnstile URL, mysql://user:password@host:port/db.
func (s *Server) URL() string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s", User, Password, s.Addr(), Database)
}

// LogPath is the server's error log, which a restart appends to.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "error.log") }

func (s *Server) start() error {
	cmd := exec.Command(s.bins["mariadbd"], "--no-defaults",
		"--datadir="+s.dir,
		"--socket="+s.sock,
		"--tmpdir="+s.tmp,
		"--port="+strconv.Itoa(s.port),
		"--bind-address=127.0.0.1",
		"--user=root",
		"--skip-log-bin",
		"--skip-name-resolve",
		"--innodb-buffer-pool-size=16M",
		// Tests need speed, not durability; see the package doc of
		// package mysql for what production needs.
		"--innodb-flush-log-at-trx-commit=2",
		"--max-connections=500",
		"--log-error="+s.LogPath(),
	)
	if s.certs != nil {
		cmd.Args = append(cmd.Args, "--ssl-cert="+s.certs.ServerCert, "--ssl-key="+s.certs.ServerKey, "--ssl-ca="+s.certs.CA)
	}
	if s.clock != nil {
		s.clock.Apply(cmd)
	}
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "mariadbd", s.LogPath(), 30*time.Second, 50*time.Millisecond, func() bool { _, err := s.Exec("SELECT 1"); return err == nil })
	if err != nil {
		return err
	}
	proc.Started(&s.process, cmd, exited)
	return nil
}

// Exec runs SQL as root over the unix socket with the mariadb client and
// returns its tab-separated output without column names. It is for set-up
// and inspection, not load.
func (s *Server) Exec(sql string) (string, error) {
	cmd := exec.Command(s.bins["mariadb"], "--no-defaults", "--socket="+s.sock, "-uroot",
		"--batch", "--skip-column-names", "--connect-timeout=2", "-e", sql)
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// Restart kills the server and starts it again on the same port with the
// same data directory, as after a crash: committed rows survive, sessions
// and their user locks do not.
func (s *Server) Restart() error {
	s.Kill()
	return proc.Restart("mariadbd", 50, 50*time.Millisecond, s.start)
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() { s.process.Kill() }

// Remove deletes the directory of the server's socket; the data directory
// belongs to the caller.
func (s *Server) Remove() { _ = os.RemoveAll(filepath.Dir(s.sock)) }
