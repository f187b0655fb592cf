package etcd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// staller holds back the first transaction that deletes a key with a
// given prefix as etcd does a write proposed as its leader dies: the
// proposal is lost, and etcd answers only when the request's deadline
// passes. It lets the request go (Unavailable) earlier when told to.
type staller struct {
	prefix string

	mu      sync.Mutex
	stalled bool          // the first such transaction came
	budget  time.Duration // the time its context left it when it came
	in      chan struct{} // closed when it came
	free    chan struct{} // closed to let it go
	out     chan struct{} // closed when it returned
	seen    func(del string, stalling bool)
}

func newStaller(prefix string) *staller {
	return &staller{prefix: prefix, in: make(chan struct{}), free: make(chan struct{}), out: make(chan struct{})}
}

// deletes is the first key under prefix that a transaction of deletes
// only (a clean-up's) deletes, or "".
func (s *staller) deletes(req any) string {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return ""
	}
	key, puts := "", false
	var walk func(ops []*pb.RequestOp)
	walk = func(ops []*pb.RequestOp) {
		for _, op := range ops {
			switch {
			case op.GetRequestPut() != nil:
				puts = true
			case op.GetRequestDeleteRange() != nil:
				if k := string(op.GetRequestDeleteRange().Key); key == "" && strings.HasPrefix(k, s.prefix) {
					key = k
				}
			case op.GetRequestTxn() != nil:
				walk(append(op.GetRequestTxn().Success, op.GetRequestTxn().Failure...))
			}
		}
	}
	walk(append(txn.Success, txn.Failure...))
	if puts {
		return ""
	}
	return key
}

func (s *staller) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	del := s.deletes(req)
	if del == "" {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	s.mu.Lock()
	first := !s.stalled
	s.stalled = true
	seen := s.seen
	s.mu.Unlock()
	if seen != nil {
		seen(del, !first && !closed(s.out))
	}
	if !first {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if dl, ok := ctx.Deadline(); ok {
		s.budget = time.Until(dl)
	}
	close(s.in)
	defer close(s.out)
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-s.free:
		return status.Error(codes.Unavailable, "the leader died")
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stallingBackend returns a backend over a client of its own whose first
// delete under prefix s holds back.
func stallingBackend(t *testing.T, srv *testserver.Etcd, s *staller) *etcd.Backend {
	t.Helper()
	return interceptedBackend(t, srv, s.intercept)
}

// interceptedBackend returns a backend over a client of its own whose
// requests go through intercept.
func interceptedBackend(t *testing.T, srv *testserver.Etcd, intercept grpc.UnaryClientInterceptor) *etcd.Backend {
	t.Helper()
	return dialWith(t, srv, grpc.WithChainUnaryInterceptor(intercept))
}

// dialWith returns a backend over a client of its own dialled with opts,
// both closed when the test ends.
func dialWith(t *testing.T, srv *testserver.Etcd, opts ...grpc.DialOption) *etcd.Backend {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(); _ = cli.Close() })
	return b
}

// TestSweepNotHeldUpByALostDelete: a sweeper delete that etcd does not
// answer (its proposal lost as the leader died) holds up no other key's:
// the sweeper's deletes go out side by side, each bounded on its own.
func TestSweepNotHeldUpByALostDelete(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	s := newStaller(etcd.DefaultPrefix + "queue/lost")
	var other sync.Once
	heldUp := make(chan bool, 1)
	s.seen = func(del string, stalling bool) {
		if strings.HasSuffix(del, "/other") {
			other.Do(func() {
				heldUp <- !stalling
				close(s.free) // the lost one may go now
			})
		}
	}
	b := stallingBackend(t, srv, s)
	ctx := ctxFor(t, time.Minute)
	lease, err := raw.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	lost, next := etcd.DefaultPrefix+"queue/lost/w1", etcd.DefaultPrefix+"queue/lost/other"
	for _, k := range []string{lost, next} {
		if _, err := raw.Put(ctx, k, "w", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	b.Orphan(lost, "w", lease.ID)
	select {
	case <-s.in:
	case <-ctx.Done():
		t.Fatal("the sweeper never deleted the first orphan")
	}
	b.Orphan(next, "w", lease.ID)
	select {
	case h := <-heldUp:
		if h {
			t.Fatalf("the sweeper sent the second orphan's delete only after the first, unanswered, ended (its bound: %v)", s.budget)
		}
	case <-ctx.Done():
		t.Fatal("the sweeper never deleted the second orphan")
	}
	for _, k := range []string{next, lost} {
		waitGone(t, raw, k)
	}
}

// TestLostDropRetried: when the delete that takes a failed waiter out of
// the queue is lost (etcd answers it only at its deadline), the waiter
// key goes with a later attempt, and the next waiter gets the lock; the
// lost attempt holds the queue for a short bound, not the clean-up's
// whole budget.
func TestLostDropRetried(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	s := newStaller(etcd.DefaultPrefix + "queue/")
	waiter := stallingBackend(t, srv, s)
	holder, next := dial(t, srv), dial(t, srv)
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := holder.Acquire(ctx, "q", "h", shortTTL); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	stop, failed := renewing(t, holder, "q", "h")
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := waiter.AcquireWait(wctx, "q", "w", shortTTL)
	cancel()
	if err == nil {
		t.Fatal("the waiter got a held lock")
	}
	select {
	case <-s.in:
	case <-ctx.Done():
		t.Fatal("the failed waiter's key was never deleted")
	}
	// At most the attempt bound of a clean-up request: 2 s.
	if s.budget > 2*time.Second {
		t.Errorf("a clean-up delete may wait %v for a lost answer, with the waiter key blocking the queue", s.budget)
	}
	got := make(chan error, 1)
	go func() {
		_, err := next.AcquireWait(ctx, "q", "n", shortTTL)
		got <- err
	}()
	stop()
	select {
	case err := <-failed:
		if err != nil {
			t.Fatalf("the holder: %v", err)
		}
	default:
	}
	if ok, err := holder.Release(ctx, "q", "h"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the next waiter: %v", err)
	}
	waitGone(t, raw, etcd.DefaultPrefix+"queue/q/w")
}

// waitGone waits until key is not in etcd.
func waitGone(t *testing.T, raw *clientv3.Client, key string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for {
		r, err := raw.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s still in etcd: %v", key, err)
		}
		if len(r.Kvs) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still in etcd", key)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
