//go:build unix

package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoServesMetrics: after the flash sale, a scrape of the demo's
// /metrics shows its acquisitions and their latency histogram; the demo
// keeps serving until interrupted, then exits with the verdict's status.
func TestDemoServesMetrics(t *testing.T) {
	t.Parallel()
	cmd, stderr := startReadingStderr(t, "demo", "flash-sale", "--json", "--in-process", "--units", "100", "--orders", "400", "--metrics-addr", "127.0.0.1:0")

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	urlRE := regexp.MustCompile(`metrics on (http://\S+)`)
	var url string
	var seen []string
	deadline := time.After(90 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended before serving its metrics; stderr:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if m := urlRE.FindStringSubmatch(l); m != nil {
				url = m[1]
			}
			if strings.Contains(l, "still serving metrics until interrupted") {
				break wait
			}
		case <-deadline:
			t.Fatalf("demo did not finish the flash sale; stderr:\n%s", strings.Join(seen, "\n"))
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	if url == "" {
		t.Fatalf("demo did not say where its metrics are; stderr:\n%s", strings.Join(seen, "\n"))
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	acquired := regexp.MustCompile(`(?m)^turnstile_acquisitions_total\{[^}]*outcome="acquired"[^}]*\} (\d+)`).FindStringSubmatch(text)
	if acquired == nil {
		t.Fatalf("no acquisition count in the scrape:\n%s", text)
	}
	if n, _ := strconv.Atoi(acquired[1]); n == 0 {
		t.Fatalf("acquisitions after the flash sale: %s, want more than 0", acquired[0])
	}
	if !regexp.MustCompile(`(?m)^turnstile_acquire_duration_seconds_bucket\{[^}]*le="0.001"[^}]*\} [1-9]`).MatchString(text) &&
		!regexp.MustCompile(`(?m)^turnstile_acquire_duration_seconds_count\{[^}]*\} [1-9]`).MatchString(text) {
		t.Fatalf("no acquire latency histogram in the scrape:\n%s", text)
	}
	stopWithin30s(t, cmd, syscall.SIGINT, "demo")
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after an interrupt while serving metrics, want the verdict's 0", code)
	}
}

// TestRunServesMetrics: while the command runs, /metrics shows the lease
// turnstile run holds.
func TestRunServesMetrics(t *testing.T) {
	t.Parallel()
	cmd, stderr := startReadingStderr(t, "run", "--backend", "mem://", "--key", "lock:job:metrics", "--metrics-addr", "127.0.0.1:0", "--", "sleep", "30")
	sc := bufio.NewScanner(stderr)
	var url string
	for url == "" && sc.Scan() {
		if m := regexp.MustCompile(`metrics on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatal("turnstile run did not say where its metrics are")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	held := regexp.MustCompile(`(?m)^turnstile_leases_held\{[^}]*\} 1$`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if held.Match(body) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no held lease in the scrape while the command runs:\n%s", body)
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// SIGTERM goes to the command; turnstile releases and exits with its
	// status (143).
	stopWithin30s(t, cmd, syscall.SIGTERM, "turnstile run")
}

// startReadingStderr starts the built binary with args, its stdout
// discarded, and returns it with its stderr to read. The process is
// killed when the test ends.
func startReadingStderr(t *testing.T, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil { // stdout goes to the null device
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stderr
}

// stopWithin30s sends sig to cmd, which it calls what, and waits for it
// to exit, for 30 s at most.
func stopWithin30s(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, what string) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30 s after %v", what, sig)
	}
}
