package service_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
)

// http1Call sends one Connect call over c, HTTP/1.1, keeping the
// connection, and returns the response and its body.
func http1Call(t *testing.T, c net.Conn, br *bufio.Reader, procedure, body string) (*http.Response, string) {
	t.Helper()
	req := fmt.Sprintf("POST /turnstile.v1.Locks/%s HTTP/1.1\r\nHost: turnstile\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", procedure, len(body), body)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(data)
}

// TestDrainHTTP1: a draining instance answers a call on an HTTP/1.1
// connection DRAINING and closes the connection after it, and closes no
// idle HTTP/1.1 connection before its client has (or HTTP1Grace ran
// out): a request crossing that close could not be told that it never
// ran.
func TestDrainHTTP1(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()}, func(o *service.ServeOptions) {
		o.HTTP1Grace = time.Minute
		o.DrainTimeout = 2 * time.Minute
	})
	c, err := net.Dial("tcp", in.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if resp, body := http1Call(t, c, br, "TryAcquire", `{"key":"k1"}`); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("before the drain: %s %q, closing %v", resp.Status, body, resp.Close)
	}

	stopped := make(chan struct{})
	go func() {
		in.stop()
		close(stopped)
	}()
	h2 := clientsOf(t, in.addr).http
	if err := proc.Poll(30*time.Second, 5*time.Millisecond, func() error {
		resp, err := h2.Get("http://" + in.addr + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return errNotYet
		}
		return nil
	}); err != nil {
		t.Fatalf("the instance never said it drains: %v", err)
	}
	select {
	case <-stopped:
		t.Fatal("the drain ended while an HTTP/1.1 connection was open, idle")
	default:
	}

	resp, body := http1Call(t, c, br, "TryAcquire", `{"key":"k2"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "DRAINING") || !resp.Close {
		t.Fatalf("during the drain: %s %q, closing %v; want 503, DRAINING, Connection: close", resp.Status, body, resp.Close)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the connection after the DRAINING answer: %v, want it closed", err)
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the drain did not end once the HTTP/1.1 connection was closed")
	}
}
