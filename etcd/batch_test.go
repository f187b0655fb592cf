package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// txnGate sees every transaction a backend sends. While closed it holds
// each one back until the test lets it go.
type txnGate struct {
	mu     sync.Mutex
	closed bool
	seen   []sentTxn
	held   chan *heldTxn // each transaction held back, as it arrives
}

// sentTxn is a transaction as it went to etcd.
type sentTxn struct {
	writes int      // the writes it carries: nested transactions, or 1
	keys   []string // the keys it puts or deletes
	err    error    // etcd's answer, when it came
}

type heldTxn struct {
	sentTxn
	release chan struct{}
}

func newTxnGate() *txnGate { return &txnGate{held: make(chan *heldTxn, 1024)} }

func (g *txnGate) close() { g.mu.Lock(); g.closed = true; g.mu.Unlock() }

func (g *txnGate) open() { g.mu.Lock(); g.closed = false; g.mu.Unlock() }

// log is every transaction sent so far, in order of arrival.
func (g *txnGate) log() []sentTxn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.seen)
}

func (g *txnGate) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tr, ok := req.(*pb.TxnRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	s := sentTxn{writes: 1, keys: txnKeys(nil, tr)}
	if len(tr.Compare) == 0 && len(tr.Failure) == 0 && len(tr.Success) > 1 {
		s.writes = len(tr.Success)
	}
	g.mu.Lock()
	hold := g.closed
	i := len(g.seen)
	g.seen = append(g.seen, s)
	g.mu.Unlock()
	if hold {
		h := &heldTxn{sentTxn: s, release: make(chan struct{})}
		g.held <- h
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	g.mu.Lock()
	g.seen[i].err = err
	g.mu.Unlock()
	return err
}

// next is the next transaction held back.
func (g *txnGate) next(t *testing.T) *heldTxn {
	t.Helper()
	select {
	case h := <-g.held:
		return h
	case <-time.After(30 * time.Second):
		t.Fatal("no transaction reached etcd")
		return nil
	}
}

// none checks that no transaction is held back for a while.
func (g *txnGate) none(t *testing.T, why string) {
	t.Helper()
	select {
	case h := <-g.held:
		t.Fatalf("%s: a transaction on %v went to etcd", why, h.keys)
	case <-time.After(300 * time.Millisecond):
	}
}

func txnKeys(keys []string, tr *pb.TxnRequest) []string {
	for _, ops := range [][]*pb.RequestOp{tr.Success, tr.Failure} {
		for _, op := range ops {
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				keys = append(keys, string(r.RequestPut.Key))
			case *pb.RequestOp_RequestDeleteRange:
				keys = append(keys, string(r.RequestDeleteRange.Key))
			case *pb.RequestOp_RequestTxn:
				keys = txnKeys(keys, r.RequestTxn)
			}
		}
	}
	return keys
}

// gatedBackend returns a backend with opts over a client of its own
// whose transactions go through g.
func gatedBackend(t *testing.T, srv *testserver.Etcd, g *txnGate, opts ...etcd.Option) *etcd.Backend {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(g.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcd.New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(); _ = cli.Close() })
	return b
}

// gated is a test's etcd seen through a raw client, and a backend over
// it whose transactions go through a gate.
type gated struct {
	raw *clientv3.Client
	ctx context.Context
	g   *txnGate
	b   *etcd.Backend
}

func newGated(t *testing.T, opts ...etcd.Option) gated {
	t.Helper()
	srv := testserver.StartEtcd(t)
	g := newTxnGate()
	return gated{raw: rawClient(t, srv), ctx: ctxFor(t, time.Minute), g: g, b: gatedBackend(t, srv, g, opts...)}
}

// fillSlots sends lone writes on keys of their own until no more may be
// on their way, and holds them back at the gate, so that every write
// after them waits in line.
func fillSlots(t *testing.T, ctx context.Context, b *etcd.Backend, g *txnGate) (release func()) {
	t.Helper()
	g.close()
	var wg sync.WaitGroup
	var held []*heldTxn
	for i := range etcd.InFlightTxns {
		wg.Go(func() {
			k := fmt.Sprintf("/filler/%d", i)
			if _, err := b.Txn(ctx, k, "o", nil, []clientv3.Op{clientv3.OpPut(k, "x")}, nil); err != nil {
				t.Error(err)
			}
		})
		held = append(held, g.next(t))
	}
	return func() {
		for _, h := range held {
			close(h.release)
		}
		wg.Wait()
	}
}

// waitInLine waits until n writes wait in b's line.
func waitInLine(t *testing.T, b *etcd.Backend, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); b.Queued() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes in line, want %d", b.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConcurrentAcquisitionsShareATransaction: acquisitions that wait in
// line go to etcd as one transaction, and each gets its own answer: free
// keys are taken, a key another owner holds is not, a key the owner holds
// already is taken again; every token is its key's revision in etcd.
func TestConcurrentAcquisitionsShareATransaction(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	lk := func(i int) string { return b.LockKey(fmt.Sprint("k", i)) }
	const n = 20
	// k0 is another owner's, k1 this owner's already.
	if _, err := raw.Put(ctx, lk(0), "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, lk(1), "me"); err != nil {
		t.Fatal(err)
	}
	release := fillSlots(t, ctx, b, g)
	type answer struct {
		tok uint64
		ok  bool
		err error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tok, ok, err := b.Acquire(ctx, fmt.Sprint("k", i), "me", 10*time.Second)
			answers[i] = answer{tok, ok, err}
		})
	}
	waitInLine(t, b, n)
	g.open()
	release()
	wg.Wait()

	batches := 0
	for _, s := range g.log() {
		if s.writes > 1 {
			batches++
			if s.writes != n {
				t.Errorf("a transaction carried %d writes, want all %d in line", s.writes, n)
			}
		}
	}
	if batches != 1 {
		t.Fatalf("%d transactions carried several writes, want 1: %+v", batches, g.log())
	}
	var rev uint64
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("k%d: %v", i, a.err)
		}
		if a.ok != (i != 0) {
			t.Errorf("k%d: taken %v", i, a.ok)
		}
		if i == 0 {
			continue
		}
		if rev == 0 {
			rev = a.tok
		}
		if a.tok != rev {
			t.Errorf("k%d: token %d, want the transaction's revision %d", i, a.tok, rev)
		}
		got, err := raw.Get(ctx, lk(i))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "me" || uint64(got.Kvs[0].ModRevision) != a.tok || got.Kvs[0].Lease == 0 {
			t.Errorf("k%d in etcd: %v, want me's at revision %d under a lease", i, got.Kvs, a.tok)
		}
	}
	if got, _ := raw.Get(ctx, lk(0)); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "other" {
		t.Errorf("k0 in etcd: %v, want other's untouched", got.Kvs)
	}

	// The releases, in line together too.
	release = fillSlots(t, ctx, b, g)
	for i := range n {
		wg.Go(func() {
			ok, err := b.Release(ctx, fmt.Sprint("k", i), "me")
			if err != nil || ok != (i != 0) {
				t.Errorf("release k%d: %v, %v", i, ok, err)
			}
		})
	}
	waitInLine(t, b, n)
	g.open()
	release()
	wg.Wait()
	for i := 1; i < n; i++ {
		if got, _ := raw.Get(ctx, lk(i)); len(got.Kvs) != 0 {
			t.Errorf("k%d still in etcd after its release", i)
		}
	}
}

// TestOneOwnersWritesKeepTheirOrder: one owner's writes on one key
// never share a transaction, nor does the later one leave before the
// earlier one's answer.
func TestOneOwnersWritesKeepTheirOrder(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	var wg sync.WaitGroup
	put := func(k, v string) {
		wg.Go(func() {
			if _, err := b.Txn(ctx, k, "me", nil, []clientv3.Op{clientv3.OpPut(k, v)}, nil); err != nil {
				t.Error(err)
			}
		})
	}
	put("/k", "first")
	waitInLine(t, b, 1)
	put("/k", "second")
	waitInLine(t, b, 2)
	put("/other", "x")
	waitInLine(t, b, 3)
	release()
	// The first transaction carries /k's first write and /other's;
	// the second write on /k waits for its answer.
	h := g.next(t)
	if h.writes != 2 || !slices.Contains(h.keys, "/k") || !slices.Contains(h.keys, "/other") {
		t.Fatalf("first transaction: %d writes on %v, want /k's first and /other's", h.writes, h.keys)
	}
	g.none(t, "the owner's second write on /k before its first was answered")
	close(h.release)
	h = g.next(t)
	if h.writes != 1 || !slices.Contains(h.keys, "/k") {
		t.Fatalf("second transaction: %d writes on %v, want /k's second alone", h.writes, h.keys)
	}
	close(h.release)
	g.open()
	wg.Wait()
	if got, _ := raw.Get(ctx, "/k"); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "second" {
		t.Fatalf("/k in etcd: %v, want the second write last", got.Kvs)
	}
}

// TestOtherOwnersGoBeside: a write on a key another owner's write waits
// for in line leaves at once, alone, as it would without a line: a hot
// key's callers do not wait for one another's answers. One of them gets
// the lock.
func TestOtherOwnersGoBeside(t *testing.T) {
	e := newGated(t)
	ctx, g, b := e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	got := make(chan string, 2)
	var wg sync.WaitGroup
	take := func(owner string) {
		wg.Go(func() {
			if _, ok, err := b.Acquire(ctx, "k", owner, 10*time.Second); err != nil {
				t.Error(err)
			} else if ok {
				got <- owner
			}
		})
	}
	take("first")
	waitInLine(t, b, 1)
	take("second")
	h := g.next(t)
	if h.writes != 1 || !slices.Contains(h.keys, b.LockKey("k")) {
		t.Fatalf("%d writes on %v went to etcd, want the second owner's on k alone", h.writes, h.keys)
	}
	if n := b.Queued(); n != 1 {
		t.Fatalf("%d writes in line, want the first owner's still there", n)
	}
	close(h.release)
	g.open()
	release()
	wg.Wait()
	close(got)
	if winners := slices.Collect(chanSeq(got)); len(winners) != 1 {
		t.Fatalf("k taken by %v, want one owner", winners)
	}
}

func chanSeq[T any](ch <-chan T) func(func(T) bool) {
	return func(yield func(T) bool) {
		for v := range ch {
			if !yield(v) {
				return
			}
		}
	}
}

// TestRefusedTransactionIsSentWriteByWrite: etcd refuses a whole
// transaction for one write's missing lease; each write is then sent
// alone and gets its own answer.
func TestRefusedTransactionIsSentWriteByWrite(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			put := clientv3.OpPut(fmt.Sprint("/w/", i), "v")
			if i == 1 {
				put = clientv3.OpPut("/w/1", "v", clientv3.WithLease(0x7fff_0000_1234))
			}
			_, errs[i] = b.Txn(ctx, fmt.Sprint("/w/", i), "o", nil, []clientv3.Op{put}, nil)
		})
		waitInLine(t, b, i+1)
	}
	g.open()
	release()
	wg.Wait()
	if !errors.Is(rpctypes.Error(errs[1]), rpctypes.ErrLeaseNotFound) {
		t.Errorf("the write under a missing lease: %v, want lease not found", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Errorf("write %d: %v", i, errs[i])
		}
		if got, _ := raw.Get(ctx, fmt.Sprint("/w/", i)); len(got.Kvs) != 1 {
			t.Errorf("write %d not in etcd", i)
		}
	}
	var refused, alone int
	for _, s := range g.log() {
		switch {
		case s.writes == 3 && s.err != nil:
			refused++
		case s.writes == 1 && len(s.keys) == 1 && !strings.HasPrefix(s.keys[0], "/filler/"):
			alone++
		}
	}
	if refused != 1 || alone != 3 {
		t.Fatalf("%d refused transactions of 3 and %d writes sent alone, want 1 and 3: %+v", refused, alone, g.log())
	}
}

// TestTooManyOpsHalvesTheBatches: a transaction over etcd's
// --max-txn-ops (128 by default) is refused; its writes are sent alone,
// and later transactions carry half as many.
func TestTooManyOpsHalvesTheBatches(t *testing.T) {
	e := newGated(t, etcd.WithBatch(200))
	ctx, g, b := e.ctx, e.g, e.b
	round := func(n int) {
		release := fillSlots(t, ctx, b, g)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				k := fmt.Sprintf("/w/%d/%d", n, i)
				if _, err := b.Txn(ctx, k, "o", nil, []clientv3.Op{clientv3.OpPut(k, "v")}, nil); err != nil {
					t.Errorf("%s: %v", k, err)
				}
			})
		}
		waitInLine(t, b, n)
		g.open()
		release()
		wg.Wait()
	}
	round(150)
	first := g.log()
	round(150)
	var sizes []int
	for _, s := range g.log()[len(first):] {
		if s.writes > 1 {
			sizes = append(sizes, s.writes)
		}
	}
	if !slices.ContainsFunc(first, func(s sentTxn) bool {
		return s.writes == 150 && errors.Is(rpctypes.Error(s.err), rpctypes.ErrTooManyOps)
	}) {
		t.Fatalf("no transaction of 150 writes refused for too many operations: %+v", first)
	}
	if len(sizes) == 0 || slices.Max(sizes) > 75 {
		t.Fatalf("transactions after the refusal carried %v writes, want at most 75", sizes)
	}
}

// TestAbandonedInLineIsNeverSent: a write whose caller gives up while it
// waits in line leaves the line unsent.
func TestAbandonedInLineIsNeverSent(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.Txn(wctx, "/gave-up", "o", nil, []clientv3.Op{clientv3.OpPut("/gave-up", "v")}, nil)
		done <- err
	}()
	waitInLine(t, b, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the caller's cancellation", err)
	}
	if n := b.Queued(); n != 0 {
		t.Fatalf("%d writes still in line", n)
	}
	g.open()
	release()
	for _, s := range g.log() {
		if slices.Contains(s.keys, "/gave-up") {
			t.Fatal("the abandoned write went to etcd")
		}
	}
	if got, _ := raw.Get(ctx, "/gave-up"); len(got.Kvs) != 0 {
		t.Fatal("the abandoned write is in etcd")
	}
}

// TestDropComesAfterTheWriteItUndoes: an acquisition whose caller gives
// up while its transaction is on its way is dropped, and the drop's
// delete leaves only after that transaction's answer, so it cannot reach
// etcd first and leave the lock behind under a lease other locks renew.
func TestDropComesAfterTheWriteItUndoes(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	// A lock of the same TTL keeps the shared lease in use.
	if _, ok, err := b.Acquire(ctx, "keeper", "me", 10*time.Second); err != nil || !ok {
		t.Fatal(ok, err)
	}
	fillers := fillSlots(t, ctx, b, g)
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := b.Acquire(actx, "k", "me", 10*time.Second)
		done <- err
	}()
	waitInLine(t, b, 1)
	fillers() // the line leaves; k's transaction is held at the gate
	g.close()
	h := g.next(t)
	if !slices.Contains(h.keys, b.LockKey("k")) {
		t.Fatalf("held %v, want k's acquisition", h.keys)
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquisition: %v, want its deadline", err)
	}
	g.none(t, "the drop before the acquisition's answer")
	close(h.release)
	h = g.next(t)
	if !slices.Contains(h.keys, b.LockKey("k")) {
		t.Fatalf("then %v, want the drop of k", h.keys)
	}
	g.open()
	close(h.release)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := raw.Get(ctx, b.LockKey("k"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned acquisition's key is still in etcd")
		}
	}
}

// TestBatchOneSendsEachAlone: with batch=1 every write is a transaction
// of its own, however many callers wait.
func TestBatchOneSendsEachAlone(t *testing.T) {
	e := newGated(t, etcd.WithBatch(1))
	ctx, g, b := e.ctx, e.g, e.b
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			k := fmt.Sprint("k", i)
			if _, ok, err := b.Acquire(ctx, k, "me", 10*time.Second); err != nil || !ok {
				t.Error(ok, err)
			}
			if ok, err := b.Release(ctx, k, "me"); err != nil || !ok {
				t.Error(ok, err)
			}
		})
	}
	wg.Wait()
	for _, s := range g.log() {
		if s.writes != 1 {
			t.Fatalf("a transaction of %d writes with batch=1", s.writes)
		}
	}
	if _, err := etcd.New(b.Client(), etcd.WithBatch(0)); err == nil {
		t.Fatal("batch 0 accepted")
	}
}

// TestCloseWithWritesInLine: a backend closed while writes wait in line
// answers every one of them; none is left waiting, and nothing of the
// line outlives the backend (the package's leak check).
func TestCloseWithWritesInLine(t *testing.T) {
	e := newGated(t)
	ctx, g, b := e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	const n = 8
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, _, err := b.Acquire(ctx, fmt.Sprint("k", i), "me", 10*time.Second)
			done <- err
		}()
	}
	waitInLine(t, b, n)
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	g.open()
	release()
	for range n {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("a write in line was never answered after Close")
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestUnansweredLineMovesOn: a transaction of the line that etcd never
// answers — a lone write or a batch, of callers with no deadline — ends
// after the line's bound with an unknown outcome, and the writes behind
// it go.
func TestUnansweredLineMovesOn(t *testing.T) {
	e := newGated(t)
	g, b := e.g, e.b
	// Long enough for the writes behind to join the line meanwhile,
	// even on a loaded machine.
	etcd.SetLineTimeout(t, 2*time.Second)
	put := func(k string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := b.Txn(context.Background(), k, "o", nil, []clientv3.Op{clientv3.OpPut(k, "v")}, nil)
			done <- err
		}()
		return done
	}
	answer := func(what string, done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer", what)
			return nil
		}
	}
	g.close()
	var lone []<-chan error // as many as may be on their way
	for i := range etcd.InFlightTxns {
		lone = append(lone, put(fmt.Sprint("/lone", i)))
		g.next(t) // never let go
	}
	behind := []<-chan error{put("/a"), put("/b")}
	waitInLine(t, b, 2)
	for i, done := range lone {
		if err := answer("a lone write", done); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("unanswered lone write %d: %v, want the line's deadline", i, err)
		}
	}
	// The two behind it leave as one transaction, held too.
	if h := g.next(t); h.writes != 2 {
		t.Fatalf("a transaction of %d writes, want the 2 in line", h.writes)
	}
	// A write after them goes as the line's next transaction: at once
	// when more than one may be on its way, else once they ended.
	last := put("/last")
	h := g.next(t)
	if !slices.Contains(h.keys, "/last") {
		t.Fatalf("then %v, want /last", h.keys)
	}
	g.open()
	close(h.release)
	if err := answer("the last write", last); err != nil {
		t.Fatal(err)
	}
	for i, done := range behind {
		if err := answer("a batched write", done); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("batched write %d: %v, want the line's deadline", i, err)
		}
	}
}
