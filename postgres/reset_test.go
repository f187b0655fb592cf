package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/postgres"
)

// cutProxy forwards TCP connections to a server until cut: then it
// resets every connection it carries, and the connections it accepts
// from then on hear nothing, ever — not even after the heal, as when a
// network fault lost a new connection's packets and the client's kernel
// still waits for an answer. Connections accepted after the heal are
// forwarded again. A proxy made by newResetProxy instead resets the
// connections it accepts while cut, at once, and counts them.
type cutProxy struct {
	ln       net.Listener
	upstream string
	reset    bool         // while cut, reset accepted connections rather than hold them silent
	accepted atomic.Int64 // the connections reset at once while cut

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool // true: forwarded; false: held silent
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	return startProxy(t, &cutProxy{upstream: upstream})
}

// newResetProxy returns a proxy that, while cut, resets every connection
// it carries and every one it accepts, at once, as a server that refuses
// connections does, and counts those it accepts.
func newResetProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	return startProxy(t, &cutProxy{upstream: upstream, reset: true})
}

// startProxy has p listen on a loopback port and forward, until the test
// ends.
func startProxy(t *testing.T, p *cutProxy) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.ln, p.conns = ln, map[net.Conn]bool{}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut && p.reset {
			p.mu.Unlock()
			p.accepted.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
			continue
		}
		if p.cut {
			p.conns[c] = false
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
	}
}

// setCut cuts (true) or heals (false). Cutting resets the forwarded
// connections.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if !cut {
		return
	}
	for c, forwarded := range p.conns {
		if forwarded {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // an RST, not a FIN
			}
			c.Close()
			delete(p.conns, c)
		}
	}
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// heldThrough dials a Backend whose connections go through p, and has it
// take a lock on a key of its own named after prefix, which it returns.
func heldThrough(t *testing.T, p *cutProxy, prefix string, opts ...postgres.Option) (*postgres.Backend, string) {
	t.Helper()
	cfg := connConfig(t, srv)
	host, port, err := net.SplitHostPort(p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	cfg.Host, cfg.Port = host, uint16(n)
	b := dialConfig(t, cfg, opts...)
	key := prefix + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, ok, err := b.Acquire(ctxFor(t, time.Minute), key, "a", time.Minute); err != nil || !ok {
		t.Fatalf("Acquire before the fault = %v, %v", ok, err)
	}
	return b, key
}

// TestSessionAfterReset: after a fault that reset a Backend's connection
// and swallowed the dial that followed, the first operation after the
// heal gets a session within a dial's hedge, not once the swallowed
// dial has used up its operation timeout. Operations go on during the
// fault, as a lock's waiters and renewals do, so that one of them dials
// into the fault.
//
// The bound: with an operation timeout of 10 s, a fresh dial starts once
// the swallowed one has gone unanswered for 1 s; a dial and an
// acquisition on loopback take milliseconds, which leaves 4 s of the
// 5-s bound for a loaded machine's scheduling. Waiting behind the
// swallowed dial takes the rest of its 10 s after the heal: 9 s here.
func TestSessionAfterReset(t *testing.T) {
	const opTimeout = 10 * time.Second
	p := newCutProxy(t, srv.Addr())
	b, key := heldThrough(t, p, "reset", postgres.WithConns(1), postgres.WithOpTimeout(opTimeout))
	ctx := ctxFor(t, time.Minute)

	p.setCut(true)
	var during sync.WaitGroup
	for i := range 5 {
		during.Go(func() {
			actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, _, _ = b.Acquire(actx, key+":"+strconv.Itoa(i), "b", time.Minute)
		})
		time.Sleep(200 * time.Millisecond)
	}
	p.setCut(false)
	healed := time.Now()

	var last error
	for time.Since(healed) < 2*opTimeout {
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, ok, err := b.Acquire(actx, key+":after", "c", time.Minute)
		cancel()
		if err == nil && ok {
			break
		}
		last = err
		if err == nil {
			last = errors.New("the lock is held")
		}
	}
	took := time.Since(healed)
	during.Wait()
	if took > opTimeout/2 {
		t.Fatalf("the first grant after the heal took %v (bound %v; last error: %v)", took.Round(time.Millisecond), opTimeout/2, last)
	}
	t.Logf("granted %v after the heal", took.Round(time.Millisecond))
}

// TestResetDialsAtABoundedRate: while the server resets every
// connection, a Backend's operations do not each open one. Eight
// callers acquire in a loop on one lock connection for a second of
// resets: each failed attempt pauses the next (50 ms doubling to
// 500 ms), so some five attempts are made, where without the pause every
// operation started its own — hundreds a second, each a process a
// PostgreSQL server forks, whose backlog delays the first connection
// after the heal by seconds. The first grant after the heal comes within
// the longest pause plus a dial.
func TestResetDialsAtABoundedRate(t *testing.T) {
	p := newResetProxy(t, srv.Addr())
	b, key := heldThrough(t, p, "resetrate", postgres.WithConns(1), postgres.WithOpTimeout(5*time.Second))
	ctx := ctxFor(t, time.Minute)

	p.setCut(true)
	const fault = time.Second
	var during sync.WaitGroup
	var lastErr atomic.Value
	for i := range 8 {
		during.Go(func() {
			for end := time.Now().Add(fault); time.Now().Before(end); {
				actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				_, _, err := b.Acquire(actx, key+":"+strconv.Itoa(i), "b", time.Minute)
				cancel()
				if err != nil {
					lastErr.Store(err.Error())
				}
			}
		})
	}
	during.Wait()
	p.setCut(false)
	healed := time.Now()
	attempts := p.accepted.Load()

	for {
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, ok, err := b.Acquire(actx, key+":after", "c", time.Minute)
		cancel()
		if err == nil && ok {
			break
		}
		if time.Since(healed) > 10*time.Second {
			t.Fatalf("no grant within 10 s of the heal: %v, %v", ok, err)
		}
	}
	took := time.Since(healed)
	t.Logf("%d connection attempts in %v of resets (last error: %v); granted %v after the heal", attempts, fault, lastErr.Load(), took.Round(time.Millisecond))
	// Paused, a second holds at most 7 attempts (0, then ≥ 25, 50, 100,
	// 200, 250, 250 ms later); a descheduled machine only makes fewer.
	if attempts > 12 {
		t.Fatalf("%d connection attempts in %v of resets: each operation dialled", attempts, fault)
	}
	if attempts == 0 {
		t.Fatal("no connection attempt during the fault: the test did not reach the server")
	}
	// A caller either saw its own attempt fail or gave up waiting for
	// the next and was told the last attempt's error.
	if msg, _ := lastErr.Load().(string); !strings.Contains(msg, "failed to connect") {
		t.Fatalf("an acquisition that gave up did not say why: %q", msg)
	}
}
