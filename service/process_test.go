package service_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// turnstileCmd is the command the cases that need a real "turnstile serve"
// process run, built once for the package's tests.
var turnstileCmd = testserver.NewBinary("github.com/turnstilelock/turnstile/cmd/turnstile")

// serveProc is a "turnstile serve" process.
type serveProc struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	log    strings.Builder
	exited chan struct{}
	err    error
}

// startServe starts "turnstile serve --listen 127.0.0.1:PORT args..." and
// waits until it serves. It is stopped with SIGTERM when the test ends,
// and SIGKILLed if it has not drained 20 s later.
func startServe(t testing.TB, args ...string) *serveProc {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{addr: "127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	p.cmd = exec.Command(turnstileCmd.Path(t), append([]string{"serve", "--listen", p.addr}, args...)...)
	p.cmd.Env = os.Environ()
	proc.DieWithParent(p.cmd)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), "turnstile serve: serving ") {
				once.Do(func() { close(serving) })
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { testserver.StopCommand(t, p.cmd, p.exited, p.output) })
	select {
	case <-serving:
	case <-p.exited:
		t.Fatalf("turnstile serve exited: %v\n%s", p.err, p.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("turnstile serve did not serve within 60s\n%s", p.output())
	}
	return p
}

func (p *serveProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// signal sends sig to the process.
func (p *serveProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits up to d for the process to exit and returns its error.
func (p *serveProc) wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("turnstile serve still runs %v later\n%s", d, p.output())
		return nil
	}
}
