package zookeeper_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// dialAllowance is how much longer than its dial timeout an Open that
// finds no server may take on a loaded machine: a descheduled test, the
// client's last connection attempt (1 s) and closing the session.
const dialAllowance = 10 * time.Second

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// silentServer returns the address of a listener that accepts
// connections and never answers, as a hung server or a black-holed
// link does.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// openWithin opens u with context.Background() and fails the test if
// Open has not returned after bound.
func openWithin(t *testing.T, u string, bound time.Duration) (*turnstile.Client, time.Duration, error) {
	t.Helper()
	type result struct {
		c   *turnstile.Client
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		c, err := turnstile.Open(context.Background(), u)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, time.Since(start), r.err
	case <-time.After(bound):
		t.Fatalf("Open(context.Background(), %q) still waiting after %v", u, bound)
		return nil, 0, nil
	}
}

// TestOpenWithoutServerEnds: with no ZooKeeper to talk to — nothing
// listening, or a listener that never answers — Open with a context
// that never ends gives up after the dial timeout (5 s by default,
// dial_timeout in the URL) with an error that names the servers.
func TestOpenWithoutServerEnds(t *testing.T) {
	for _, tc := range []struct {
		name, addr, query string
		timeout           time.Duration
	}{
		{"NothingListens", deadAddr(t), "", 5 * time.Second},
		{"NeverAnswers", silentServer(t), "", 5 * time.Second},
		{"DialTimeout", silentServer(t), "?dial_timeout=1500ms", 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, took, err := openWithin(t, "zookeeper://"+tc.addr+tc.query, tc.timeout+dialAllowance)
			if err == nil {
				_ = c.Close()
				t.Fatal("Open without a server succeeded")
			}
			t.Logf("Open took %v: %v", took, err)
			if !strings.Contains(err.Error(), tc.addr) || !strings.Contains(err.Error(), "dial timeout") {
				t.Fatalf("error %q does not name the server %s and the dial timeout", err, tc.addr)
			}
			if took < tc.timeout {
				t.Fatalf("Open gave up after %v, before its dial timeout %v", took, tc.timeout)
			}
		})
	}
}

// TestOpenPassesSilentServers: servers of the list that accept the
// connection and never answer cost a share of the dial timeout each, not
// the whole of it: the client moves on to the one that answers.
func TestOpenPassesSilentServers(t *testing.T) {
	addrs := []string{silentServer(t), silentServer(t), silentServer(t), srv.Addr()}
	c, took, err := openWithin(t, "zookeeper://"+strings.Join(addrs, ",")+"?dial_timeout=12s", 12*time.Second+dialAllowance)
	if err != nil {
		t.Fatalf("Open with three silent servers and one that answers: %v", err)
	}
	defer c.Close()
	t.Logf("Open took %v", took)
	ctx := ctxFor(t, 30*time.Second)
	l, err := c.TryAcquire(ctx, "past-silent")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}
