package service_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// held reports whether key is held, asking the instance at addr.
func held(t *testing.T, c apiClients, key string) bool {
	t.Helper()
	r, err := c.locks.Status(ctxFor(t, 10*time.Second), connect.NewRequest(&v1.StatusRequest{Key: key}))
	if err != nil {
		t.Fatalf("Status %q: %v", key, err)
	}
	return r.Msg.State.Held
}

// holdStream opens a Hold stream and reads its grant.
func holdStream(t *testing.T, ctx context.Context, c apiClients, req *v1.HoldRequest) (*connect.ServerStreamForClient[v1.HoldResponse], *v1.AcquireResponse) {
	t.Helper()
	s, err := c.locks.Hold(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !s.Receive() {
		t.Fatalf("Hold ended before its grant: %v", s.Err())
	}
	g := s.Msg().GetGranted()
	if g == nil {
		t.Fatalf("Hold's first message is %v, want granted", s.Msg())
	}
	return s, g
}

// forceReleaseLost force-releases key through c and reads s until it
// says the lease was lost; it returns what it said, or nil if the stream
// ended first.
func forceReleaseLost(t *testing.T, c apiClients, key string, s *connect.ServerStreamForClient[v1.HoldResponse]) *v1.Ended {
	t.Helper()
	if _, err := c.locks.ForceRelease(ctxFor(t, 10*time.Second), connect.NewRequest(&v1.ForceReleaseRequest{Key: key})); err != nil {
		t.Fatal(err)
	}
	for s.Receive() {
		if lost := s.Msg().GetLost(); lost != nil {
			return lost
		}
	}
	return nil
}

// TestHoldLostIsSaid: a lease removed by force under a Hold stream is
// reported lost on the stream at its next renewal, and the stream ends
// with FAILED_PRECONDITION, reason LOCK_LOST.
func TestHoldLostIsSaid(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	c := clientsOf(t, in.addr)
	s, g := holdStream(t, ctxFor(t, time.Minute), c, &v1.HoldRequest{Key: "hold:lost", Ttl: durationpb.New(600 * time.Millisecond)})
	lost := forceReleaseLost(t, c, "hold:lost", s)
	if lost == nil || lost.Reason != "LOCK_LOST" {
		t.Fatalf("stream of lease %v ended without Lost (%v)", g.Lease, s.Err())
	}
	for s.Receive() {
	}
	if err := s.Err(); connect.CodeOf(err) != connect.CodeFailedPrecondition || apierr.Reason(err) != "LOCK_LOST" {
		t.Fatalf("stream ended with %v (reason %q), want FAILED_PRECONDITION, LOCK_LOST", err, apierr.Reason(err))
	}
}

// TestHoldForceReleaseSaidAtOnce: a forced release through the instance
// that keeps a Hold stream's lease is said on the stream at once, not at
// the lease's next renewal a third of its TTL later.
func TestHoldForceReleaseSaidAtOnce(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	c := clientsOf(t, in.addr)
	const ttl = 30 * time.Second // renewed every 10 s
	s, _ := holdStream(t, ctxFor(t, time.Minute), c, &v1.HoldRequest{Key: "hold:forced", Ttl: durationpb.New(ttl)})
	start := time.Now()
	lost := forceReleaseLost(t, c, "hold:forced", s)
	took := time.Since(start)
	if lost == nil || lost.Reason != "LOCK_LOST" {
		t.Fatalf("stream ended without Lost (%v)", s.Err())
	}
	// Half the renewal period: a loaded machine's delays fit in it, and
	// a loss found by the next renewal does not.
	if took > ttl/6 {
		t.Fatalf("Lost came %v after the forced release; want it before the next renewal (%v)", took, ttl/3)
	}
}

// TestHoldCancelReleases: a client that cancels its Hold stream (its
// HTTP/2 connection stays) releases the lock at once, not at its TTL.
func TestHoldCancelReleases(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	c := clientsOf(t, in.addr)
	const ttl = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holdStream(t, ctx, c, &v1.HoldRequest{Key: "hold:cancel", Ttl: durationpb.New(ttl)})
	if !held(t, c, "hold:cancel") {
		t.Fatal("not held after the grant")
	}
	cancel()
	start := time.Now()
	for held(t, c, "hold:cancel") {
		if time.Since(start) > ttl/2 {
			t.Fatalf("still held %v after the stream was cancelled", time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHoldDrainResume: an instance that drains tells its Hold streams
// with the lease and stops renewing it; the client resumes the lease on
// another instance: the same owner id, a greater token, and the lock
// held all along.
func TestHoldDrainResume(t *testing.T) {
	store := memory.New()
	a := startInstance(t, service.Config{Backend: store})
	b := startInstance(t, service.Config{Backend: store})
	ca, cb := clientsOf(t, a.addr), clientsOf(t, b.addr)
	const key = "hold:drain"
	s, g := holdStream(t, ctxFor(t, time.Minute), ca, &v1.HoldRequest{Key: key, Ttl: durationpb.New(5 * time.Second)})
	a.Drain()
	var d *v1.Ended
	for s.Receive() {
		if d = s.Msg().GetDraining(); d != nil {
			break
		}
	}
	if d == nil || d.Reason != "DRAINING" || d.Lease.GetOwner() != g.Lease.Owner {
		t.Fatalf("draining instance's stream: %v, %v; want Draining with the lease", d, s.Err())
	}
	if !held(t, cb, key) {
		t.Fatal("the lock was released by the drain")
	}
	if _, err := ca.locks.TryAcquire(ctxFor(t, 10*time.Second), connect.NewRequest(&v1.AcquireRequest{Key: "other"})); apierr.Reason(err) != "DRAINING" {
		t.Fatalf("a call to the draining instance: %v, want UNAVAILABLE, DRAINING", err)
	}
	_, g2 := holdStream(t, ctxFor(t, time.Minute), cb, &v1.HoldRequest{Resume: d.Lease, Ttl: durationpb.New(5 * time.Second)})
	if g2.Lease.Owner != g.Lease.Owner || g2.Lease.Token <= g.Lease.Token {
		t.Fatalf("resumed lease %v, want owner %s and a token above %d", g2.Lease, g.Lease.Owner, g.Lease.Token)
	}
	// The resumed lease is renewed by b: held past the first TTL.
	time.Sleep(6 * time.Second)
	st, err := cb.locks.Status(ctxFor(t, 10*time.Second), connect.NewRequest(&v1.StatusRequest{Key: key}))
	if err != nil || !st.Msg.State.Held || st.Msg.State.Holders[0].Owner != g.Lease.Owner {
		t.Fatalf("after a TTL: %v, %v; want held by %s", st, err, g.Lease.Owner)
	}
	// A lease nobody holds is not resumed.
	other := &v1.Lease{Key: "hold:never", Owner: "x/y"}
	rs, err := cb.locks.Hold(ctxFor(t, 10*time.Second), connect.NewRequest(&v1.HoldRequest{Resume: other}))
	if err == nil {
		for rs.Receive() {
		}
		err = rs.Err()
	}
	if apierr.Reason(err) != "NOT_HELD" {
		t.Fatalf("resuming a lease nobody holds: %v, want NOT_HELD", err)
	}
}

// freezer is a TCP proxy whose traffic can be stopped without closing
// anything: the client's host gone silent, as the instance sees it.
type freezer struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen chan struct{} // closed once frozen
	closed chan struct{} // closed when the test ends
	conns  []net.Conn
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, frozen: make(chan struct{}), closed: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(f.closed)
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, s)
			f.mu.Unlock()
			wg.Go(func() { f.pipe(s, c) })
			wg.Go(func() { f.pipe(c, s) })
		}
	})
	return f
}

// pipe copies from src to dst until frozen: then it holds what it read
// and copies nothing more, closing nothing.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			<-f.closed
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) freeze() { close(f.frozen) }

// TestHoldSilentClientNotReleasedEarly: a client that goes silent — no
// FIN, no answer to pings: a host gone, a partition — may still be alive
// and believe in the validity it was last sent. The instance finds the
// silence (HTTP/2 ping timeout), stops renewing, and does not release:
// the lock stays held at least as long as that validity, and then
// expires.
func TestHoldSilentClientNotReleasedEarly(t *testing.T) {
	store := memory.New()
	in := startInstance(t, service.Config{Backend: store}, func(o *service.ServeOptions) {
		o.PingEvery, o.PingTimeout = 200*time.Millisecond, 300*time.Millisecond
	})
	f := newFreezer(t, in.addr)
	client := clientsOf(t, f.ln.Addr().String())
	direct := clientsOf(t, in.addr)
	const key = "hold:silent"
	const ttl = 3 * time.Second
	s, _ := holdStream(t, ctxFor(t, time.Minute), client, &v1.HoldRequest{Key: key, Ttl: durationpb.New(ttl)})
	if !s.Receive() || s.Msg().GetRenewed() == nil {
		t.Fatalf("no renewal: %v %v", s.Msg(), s.Err())
	}
	believed := time.Now().Add(s.Msg().GetRenewed().Validity.AsDuration())
	f.freeze()
	for time.Now().Before(believed) {
		if !held(t, direct, key) {
			t.Fatalf("released %v before the validity the silent client was last sent ran out", time.Until(believed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Not renewed any more: free within a TTL (and the ping timeout)
	// from then.
	deadline := time.Now().Add(time.Minute)
	for held(t, direct, key) {
		if time.Now().After(deadline) {
			t.Fatal("a silent client's lock is still renewed a minute later")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if in.Holds() != 0 {
		t.Fatalf("%d holds still open", in.Holds())
	}
}
