package dashboard_test

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/proctest"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestMain(m *testing.M) {
	testserver.Main(m, turnstileCmd.Shared())
}

// turnstileCmd is the command the tests run, built once for the package's
// tests.
var turnstileCmd = testserver.NewBinary("github.com/turnstilelock/turnstile/cmd/turnstile")

// process is a turnstile process a test started: stopped with SIGTERM
// when the test ends, and killed if it has not stopped 20 s later.
type process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	err    error
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// start runs turnstile with args.
func start(t testing.TB, args ...string) *process {
	t.Helper()
	p := &process{exited: make(chan struct{})}
	p.cmd = exec.Command(turnstileCmd.Path(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	proc.DieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *process) stop(t testing.TB) { testserver.StopCommand(t, p.cmd, p.exited, p.output) }

// exitCode waits up to d for the process to exit and returns its status.
func (p *process) exitCode(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("turnstile %s still runs %v later\n%s", p.cmd.Args[1], d, p.output())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("turnstile %s: %v", p.cmd.Args[1], p.err)
	}
	return 0
}

// startServe starts "turnstile serve" on a free loopback port and waits
// until it serves.
func startServe(t testing.TB, args ...string) (addr string, p *process) {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr = "127.0.0.1:" + strconv.Itoa(port)
	p = start(t, append([]string{"serve", "--listen", addr}, args...)...)
	waitFor(t, 60*time.Second, "turnstile serve to serve", func() error {
		select {
		case <-p.exited:
			t.Fatalf("turnstile serve exited: %v\n%s", p.err, p.output())
		default:
		}
		if !strings.Contains(p.output(), "turnstile serve: operator page on ") {
			return errNotYet
		}
		return nil
	})
	return addr, p
}

// token is a bearer token of the tokens file.
type token struct{ name, secret, line string }

func (k token) bearer() string { return k.name + "." + k.secret }

// makeToken makes a token with "turnstile serve token".
func makeToken(t testing.TB, name, role string, prefixes ...string) token {
	t.Helper()
	args := []string{"serve", "token", name, "--role", role}
	for _, p := range prefixes {
		args = append(args, "--prefix", p)
	}
	out, err := exec.Command(turnstileCmd.Path(t), args...).Output()
	if err != nil {
		t.Fatalf("turnstile serve token: %v", err)
	}
	var k token
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, name+"."):
			k.name, k.secret, _ = strings.Cut(l, ".")
		case strings.HasPrefix(l, "name="):
			k.line = l
		}
	}
	if k.secret == "" || k.line == "" {
		t.Fatalf("turnstile serve token printed no token:\n%s", out)
	}
	return k
}

var errNotYet = errors.New("not yet")

// waitFor polls cond until it holds, failing the test after d: the
// machine may be slow, so d is generous and nothing is timed tightly.
var waitFor = proctest.Eventually
