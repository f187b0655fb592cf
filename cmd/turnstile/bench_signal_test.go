//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// Ctrl-C during a cell stops it, releases its locks and prints the table
// of the cells measured before it, with the interrupted one under
// problems.
func TestBenchInterrupt(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	cmd := exec.Command(binary, "bench", "--url", srv.URL(), "--duration", "1s", "--only", "uncontended/c=1$|contended-1")
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	// Read stderr until the second cell has started, then interrupt.
	var stderr strings.Builder
	rd := bufio.NewReader(errPipe)
	for !strings.Contains(stderr.String(), "contended-1/c=64") {
		b, err := rd.ReadByte()
		if err != nil {
			t.Fatalf("stderr ended before the second cell started: %v\n%s", err, stderr.String())
		}
		stderr.WriteByte(b)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := rd.ReadString(0) // to the end: Wait closes the pipe
	stderr.WriteString(rest)
	err = cmd.Wait()
	close(done)
	code := cmd.ProcessState.ExitCode()
	if code != 128+int(syscall.SIGINT) {
		t.Errorf("exit code %d (%v), want %d; stderr:\n%s", code, err, 128+int(syscall.SIGINT), stderr.String())
	}
	if !strings.Contains(stderr.String(), "received SIGINT; stopped after 1 of 2 cells") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	tb := parseBenchTable(t, stdout.String())
	if v := tb.number(t, "uncontended/c=1", "acq/s"); v <= 0 {
		t.Errorf("uncontended/c=1: %v acq/s", v)
	}
	if !strings.Contains(stdout.String(), "contended-1/c=64: interrupted") {
		t.Errorf("the table does not list the interrupted cell under problems:\n%s", stdout.String())
	}
	if locks := leftoverLocks(t, srv.Addr(), 0); len(locks) > 0 {
		t.Errorf("locks left behind: %q", locks)
	}
}

// An interrupt leaves no lock held wherever it falls: at the start of a
// cell (workers warming up), at several moments while 64 workers take
// distinct keys or contend for one, and around the end of a cell. Each
// moment is counted from the line that announces the first cell.
func TestBenchInterruptLeavesNoLock(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, 900 * time.Millisecond, 1300 * time.Millisecond, 1800 * time.Millisecond} {
		t.Run(at.String(), func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			stderr := &watchWriter{want: "uncontended/c=64", seen: make(chan struct{})}
			var stdout bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- dispatch(ctx, []string{"bench", "--url", srv.URL(), "--duration", "1s", "--only", "uncontended/c=64$|contended-1/c=64"}, &stdout, stderr)
			}()
			select {
			case <-stderr.seen:
			case code := <-done:
				t.Fatalf("bench ended (exit %d) before the cell started:\n%s", code, stderr.String())
			case <-time.After(time.Minute):
				t.Fatalf("the cell did not start within a minute:\n%s", stderr.String())
			}
			time.Sleep(at)
			cancel(cli.SignalError{Sig: syscall.SIGINT})
			var code int
			select {
			case code = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("bench did not stop within a minute of the interrupt:\n%s", stderr.String())
			}
			// The cell may have ended by itself just before the interrupt.
			if code != 128+int(syscall.SIGINT) && code != exitOK {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGINT), stderr.String())
			}
			if locks := leftoverLocks(t, srv.Addr(), 0); len(locks) > 0 {
				t.Errorf("interrupted %v into the cell (exit %d), locks left behind: %q\n%s", at, code, locks, stderr.String())
			}
		})
	}
}

// watchWriter collects what is written to it and closes seen once the
// text contains want.
type watchWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
