//go:build unix

package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The tests here run one demo at a time, none in parallel: each starts
// worker processes and servers of its own, and the package's tests run
// beside the other packages' tests of turnstile's commands.
//
// The test binary stands in for the turnstile binary: run as
// "TESTBINARY demo ARGS...", it is "turnstile demo ARGS...". The demo's
// worker processes are such runs (it re-executes its own binary), and so
// are the tests that need the demo in a process of its own.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo" {
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	// A -race binary sleeps 1 s on exit unless told not to; the workers
	// inherit this.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runBound is how long a demo may run before it is taken for hung: the
// whole demo takes over a minute when the machine is busy with other
// tests and other work.
const runBound = 4 * time.Minute

// lockedBuffer is a buffer that the demo and the goroutines copying its
// workers' stderr write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// outcome is how a run of the demo ended.
type outcome struct {
	code           int
	stdout, stderr string
}

// runDemo runs "turnstile demo args..." in this process, to its end.
func runDemo(t *testing.T, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runBound)
	defer cancel()
	var stdout, stderr lockedBuffer
	code := Main(ctx, args, &stdout, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("demo %q still running after %v; stderr:\n%s", args, runBound, stderr.String())
	}
	return outcome{code, stdout.String(), stderr.String()}
}

// demoProc is "turnstile demo" run in a process of its own, for tests
// that signal it or look at its child processes.
type demoProc struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	code           int // -1 if a signal killed it: the demo exits by itself
}

// startDemo starts "turnstile demo args..."; when the test ends, the
// process gets SIGTERM, which makes the demo stop its workers and servers,
// and SIGKILL 10 s later.
func startDemo(t *testing.T, args ...string) *demoProc {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	p := &demoProc{cmd: exec.CommandContext(ctx, os.Args[0], append([]string{"demo"}, args...)...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		stop()
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() { stop(); <-p.done })
	return p
}

// wait waits for the process to exit and fails the test after timeout.
func (p *demoProc) wait(t *testing.T, timeout time.Duration) outcome {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-timer.C:
		t.Fatalf("demo %q still running after %v", p.cmd.Args[2:], timeout)
	case <-p.done:
	}
	return outcome{p.code, p.stdout.String(), p.stderr.String()}
}
