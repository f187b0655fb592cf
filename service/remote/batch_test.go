package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// gatedLocks is an instance that answers Batch alone: TryAcquire of a key
// under "slow:" waits until the gate opens. It records the size of each
// batch it gets.
type gatedLocks struct {
	turnstilev1connect.UnimplementedLocksHandler
	gate    chan struct{}
	mu      sync.Mutex
	batches []int
	protos  []int // the HTTP major version of each call
	waiting int   // slow ops waiting for the gate
}

func (g *gatedLocks) Batch(ctx context.Context, req *connect.Request[v1.BatchRequest]) (*connect.Response[v1.BatchResponse], error) {
	g.mu.Lock()
	g.batches = append(g.batches, len(req.Msg.Ops))
	g.mu.Unlock()
	out := make([]*v1.BatchResult, len(req.Msg.Ops))
	for i, op := range req.Msg.Ops {
		key := op.GetTryAcquire().GetKey()
		if strings.HasPrefix(key, "slow:") {
			g.mu.Lock()
			g.waiting++
			g.mu.Unlock()
			select {
			case <-g.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		out[i] = &v1.BatchResult{Result: &v1.BatchResult_Acquired{Acquired: &v1.AcquireResponse{Lease: &v1.Lease{Key: key, Token: uint64(i + 1)}}}}
	}
	return connect.NewResponse(&v1.BatchResponse{Results: out}), nil
}

func (g *gatedLocks) state() (batches []int, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.batches...), g.waiting
}

// gatedConn serves a gatedLocks on loopback and returns a conn to it.
func gatedConn(t *testing.T) (*conn, *gatedLocks) {
	t.Helper()
	g := &gatedLocks{gate: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle(turnstilev1connect.NewLocksHandler(g))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.protos = append(g.protos, r.ProtoMajor)
		g.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	c := newConn(Config{Hosts: []string{ln.Addr().String()}, DialTimeout: 5 * time.Second})
	t.Cleanup(func() {
		g.open()
		c.close()
		_ = srv.Close()
	})
	return c, g
}

func (g *gatedLocks) open() {
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

func tryOp(key string) *v1.BatchOp {
	return &v1.BatchOp{Op: &v1.BatchOp_TryAcquire{TryAcquire: &v1.AcquireRequest{Key: key}}}
}

// poll waits up to 10 s for cond.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (b *batcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// fillCalls takes every call of c's batcher with a slow op, and returns
// the channel their results come on.
func fillCalls(t *testing.T, c *conn, g *gatedLocks) chan error {
	t.Helper()
	done := make(chan error, maxInFlight)
	for i := range maxInFlight {
		go func() {
			_, err := c.ops.do(context.Background(), tryOp(fmt.Sprint("slow:", i)))
			done <- err
		}()
	}
	poll(t, "the slow ops to reach the instance", func() bool { _, w := g.state(); return w == maxInFlight })
	return done
}

// TestBatcherAlone: an op that finds a call free goes out at once, as a
// batch of its own, and gets its own answer.
func TestBatcherAlone(t *testing.T) {
	c, g := gatedConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		r, err := c.ops.do(ctx, tryOp(fmt.Sprint("k", i)))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.GetAcquired().GetLease().GetKey(); got != fmt.Sprint("k", i) {
			t.Fatalf("op %d answered for %q", i, got)
		}
	}
	if batches, _ := g.state(); fmt.Sprint(batches) != "[1 1 1]" {
		t.Fatalf("batches %v, want three of one op", batches)
	}
}

// TestBatchTransport: a Batch call that follows the last one within
// batchIdle goes over HTTP/1.1, any other over HTTP/2.
func TestBatchTransport(t *testing.T) {
	c, g := gatedConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if i == 2 {
			c.lastBatch.Store(time.Now().Add(-2 * batchIdle).UnixNano())
		}
		if _, err := c.ops.do(ctx, tryOp("k")); err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if fmt.Sprint(g.protos) != "[2 1 2]" {
		t.Fatalf("HTTP versions of the calls: %v, want [2 1 2]: the first and one after an idle while over HTTP/2", g.protos)
	}
}

// TestBatcherQueues: while every call is taken, ops queue, and leave
// together as the next batch when a call ends; a queued op whose
// context ends returns at once and is not sent.
func TestBatcherQueues(t *testing.T) {
	c, g := gatedConn(t)
	slow := fillCalls(t, c, g)

	gone, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.ops.do(gone, tryOp("cancelled"))
		cancelled <- err
	}()
	const n = 7
	type answer struct {
		key string
		err error
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			r, err := c.ops.do(context.Background(), tryOp(fmt.Sprint("q", i)))
			answers <- answer{r.GetAcquired().GetLease().GetKey(), err}
		}()
	}
	poll(t, "every op to queue", func() bool { return c.ops.queued() == n+1 })
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued op whose context ended: %v, want context.Canceled", err)
	}
	select {
	case a := <-answers:
		t.Fatalf("a queued op was answered while every call was taken: %+v", a)
	default:
	}

	g.open()
	for range maxInFlight {
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		a := <-answers
		if a.err != nil || !strings.HasPrefix(a.key, "q") {
			t.Fatalf("answer %d: %+v", i, a)
		}
	}
	batches, _ := g.state()
	if fmt.Sprint(batches[maxInFlight:]) != fmt.Sprint([]int{n}) {
		t.Fatalf("batches after the slow ones: %v, want one of the %d ops still wanted", batches[maxInFlight:], n)
	}
}

// TestBatcherMaxOps: a queue longer than maxOps leaves in batches of at
// most maxOps.
func TestBatcherMaxOps(t *testing.T) {
	c, g := gatedConn(t)
	slow := fillCalls(t, c, g)
	const n = maxOps + 10
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.ops.do(context.Background(), tryOp(fmt.Sprint("q", i)))
			errs <- err
		}()
	}
	poll(t, "every op to queue", func() bool { return c.ops.queued() == n })
	g.open()
	for range maxInFlight {
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	batches, _ := g.state()
	total := 0
	for _, size := range batches[maxInFlight:] {
		if size > maxOps {
			t.Fatalf("a batch of %d ops, over %d", size, maxOps)
		}
		total += size
	}
	if total != n {
		t.Fatalf("%d ops sent, want %d", total, n)
	}
}

// TestBatcherClose: closing fails every op not sent yet, and every op
// after; the ops on their way end as their calls do.
func TestBatcherClose(t *testing.T) {
	c, g := gatedConn(t)
	slow := fillCalls(t, c, g)
	queued := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := c.ops.do(context.Background(), tryOp(fmt.Sprint("q", i)))
			queued <- err
		}()
	}
	poll(t, "every op to queue", func() bool { return c.ops.queued() == 3 })
	c.ops.close()
	for range 3 {
		if err := <-queued; !errors.Is(err, errClosedConn) {
			t.Fatalf("queued op at close: %v, want errClosedConn", err)
		}
	}
	if _, err := c.ops.do(context.Background(), tryOp("after")); !errors.Is(err, errClosedConn) {
		t.Fatalf("op after close: %v, want errClosedConn", err)
	}
	g.open()
	for range maxInFlight {
		if err := <-slow; err != nil {
			t.Fatalf("op on its way at close: %v", err)
		}
	}
	if batches, _ := g.state(); len(batches) != maxInFlight {
		t.Fatalf("batches %v: the closed batcher sent more", batches)
	}
}
