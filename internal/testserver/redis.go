// Package testserver starts real servers for tests: each on a free
// loopback port, in a temporary directory, stopped when the test ends. A
// missing server binary fails the test with the command that installs it.
package testserver

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
	"sync"
	"syscall"
	"testing"
	"time"
)

// InstallHint is the command that installs every server the tests use.
const InstallHint = "apt-get update && apt-get install -y redis-server (or run ./scripts/test.sh, which installs it)"

// Redis is a redis-server process started for a test.
type Redis struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedis starts redis-server on a free loopback port with persistence
// off, and stops it when the test (or benchmark) ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH; install it with: %s", InstallHint)
	}
	r := &Redis{t: t, bin: bin, dir: t.TempDir()}
	var lastErr error
	for range 5 {
		r.port, lastErr = freePort()
		if lastErr != nil {
			continue
		}
		if lastErr = r.start(); lastErr == nil {
			t.Cleanup(r.stop)
			return r
		}
	}
	t.Fatalf("start redis-server: %v", lastErr)
	return nil
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// URL is the server's turnstile URL, redis://host:port.
func (r *Redis) URL() string { return "redis://" + r.Addr() }

func (r *Redis) start() error {
	cmd := exec.Command(r.bin,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
		"--logfile", filepath.Join(r.dir, "redis.log"),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %v: %s", err, strings.TrimSpace(string(log)))
		default:
		}
		if r.ping() == nil {
			r.mu.Lock()
			r.cmd = cmd
			r.mu.Unlock()
			go func() { <-exited }()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return errors.New("redis-server did not answer PING within 10s")
}

// ping sends PING over a raw connection, so that this package needs no
// Redis client.
func (r *Redis) ping() error {
	reply, err := r.Do("PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}

// Do sends one command and returns the first line of the reply without its
// type byte (for example "PONG", "1", or an error message). It is for test
// set-up and inspection, not for load.
func (r *Redis) Do(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", r.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line[1:], nil
}

// Restart kills the server and starts it again on the same port with an
// empty data set, as a restart without persistence does.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Kill()
	var err error
	for range 50 {
		if err = r.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("restart redis-server: %v", err)
}

// Kill stops the server with SIGKILL and waits until it is gone.
func (r *Redis) Kill() {
	r.mu.Lock()
	cmd := r.cmd
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	for range 500 {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	for range 500 {
		if r.ping() != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *Redis) stop() { r.Kill() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
