package service_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/service"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

func tryOp(key, owner string) *v1.BatchOp {
	return &v1.BatchOp{Op: &v1.BatchOp_TryAcquire{TryAcquire: &v1.AcquireRequest{Key: key, Owner: owner, Ttl: durationpb.New(time.Minute)}}}
}

func extendOp(key, owner string) *v1.BatchOp {
	return &v1.BatchOp{Op: &v1.BatchOp_Extend{Extend: &v1.ExtendRequest{Lease: &v1.Lease{Key: key, Owner: owner}, Ttl: durationpb.New(time.Minute)}}}
}

func releaseOp(key, owner string) *v1.BatchOp {
	return &v1.BatchOp{Op: &v1.BatchOp_Release{Release: &v1.ReleaseRequest{Lease: &v1.Lease{Key: key, Owner: owner}}}}
}

// TestBatch: each op of a Batch is answered, in order, as its own call
// would be — its result or its own error, which fails no other op —
// and counted in the metrics under its own method, with its latency.
func TestBatch(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testBatch(t, memory.New()) })
	// A store that makes many ops in one round trip (driver.Batcher)
	// gets a batch's acquisitions and releases in one call, and answers
	// each as its own call would.
	t.Run("redis", func(t *testing.T) {
		cb := countingRedis(t, testserver.StartRedis(t))
		testBatch(t, cb)
		checkManyCalls(t, &cb.batchCount)
	})
	t.Run("etcd", func(t *testing.T) {
		cb := countingEtcd(t, testserver.StartEtcd(t))
		testBatch(t, cb)
		checkManyCalls(t, &cb.batchCount)
	})
}

// checkManyCalls checks the DoMany calls testBatch makes: the batch of
// one TryAcquire, the seven ops' four acquisitions and releases (the
// refused ones never reach the store, the extension goes alone), the
// batch of one Release.
func checkManyCalls(t *testing.T, c *batchCount) {
	t.Helper()
	if calls, ops := c.calls.Load(), c.ops.Load(); calls != 3 || ops != 6 {
		t.Errorf("DoMany: %d calls with %d ops, want 3 with 6", calls, ops)
	}
}

// countingRedis returns a Redis backend on srv whose DoMany calls are
// counted, closed when the test ends.
func countingRedis(t *testing.T, srv *testserver.Redis) *countingRedisBackend {
	t.Helper()
	opt, opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := redis.Dial(ctxFor(t, 30*time.Second), opt, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rb.Close() })
	return &countingRedisBackend{Backend: rb}
}

// countingEtcd returns an etcd backend on srv whose DoMany calls are
// counted, closed when the test ends.
func countingEtcd(t *testing.T, srv *testserver.Etcd) *countingEtcdBackend {
	t.Helper()
	eb, err := etcd.Dial(ctxFor(t, 30*time.Second), clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eb.Close() })
	return &countingEtcdBackend{Backend: eb}
}

// batchCount counts the calls of a backend's DoMany, and their ops.
type batchCount struct{ calls, ops atomic.Int32 }

func (c *batchCount) count(ops []driver.Op) []driver.Op {
	c.calls.Add(1)
	c.ops.Add(int32(len(ops)))
	return ops
}

type countingRedisBackend struct {
	*redis.Backend
	batchCount
	extends batchCount // ExtendMany's calls and requests
}

func (c *countingRedisBackend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	c.extends.calls.Add(1)
	c.extends.ops.Add(int32(len(reqs)))
	return c.Backend.ExtendMany(ctx, reqs)
}

func (c *countingRedisBackend) DoMany(ctx context.Context, ops []driver.Op) []driver.OpResult {
	return c.Backend.DoMany(ctx, c.count(ops))
}

type countingEtcdBackend struct {
	*etcd.Backend
	batchCount
}

func (c *countingEtcdBackend) DoMany(ctx context.Context, ops []driver.Op) []driver.OpResult {
	return c.Backend.DoMany(ctx, c.count(ops))
}

func testBatch(t *testing.T, store driver.Backend) {
	reg := prometheus.NewRegistry()
	ts, bearer := tokens(t, map[string]string{"alpha": "lock a:"})
	in := startInstance(t, service.Config{Backend: store, Registerer: reg, Tokens: ts})
	c := clientsOf(t, in.addr, withToken(bearer["alpha"]))
	ctx := ctxFor(t, 30*time.Second)

	// One op alone, then many: a batch of one is made as one of many.
	one, err := c.locks.Batch(ctx, connect.NewRequest(&v1.BatchRequest{Ops: []*v1.BatchOp{tryOp("a:0", "o0")}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := one.Msg.Results; len(got) != 1 || got[0].GetAcquired().GetLease().GetToken() == 0 {
		t.Fatalf("a batch of one TryAcquire answered %v", got)
	}
	ops := []*v1.BatchOp{
		tryOp("a:1", "o1"), // ops run at once: one of these two
		tryOp("a:1", "o2"), // gets a:1, the other NOT_ACQUIRED
		extendOp("a:0", "o0"),
		releaseOp("a:0", "someone else"),
		tryOp("b:1", "o1"), // outside the token's prefix
		{},                 // no op at all
		tryOp("a:2", "o1"),
	}
	r, err := c.locks.Batch(ctx, connect.NewRequest(&v1.BatchRequest{Ops: ops}))
	if err != nil {
		t.Fatal(err)
	}
	res := r.Msg.Results
	if len(res) != len(ops) {
		t.Fatalf("%d results for %d ops", len(res), len(ops))
	}
	reason := func(i int) string {
		t.Helper()
		return errorReason(t, res, i)
	}
	won, lost := 0, 1
	if res[0].GetAcquired() == nil {
		won, lost = 1, 0
	}
	if l := res[won].GetAcquired().GetLease(); l.GetKey() != "a:1" || l.GetOwner() != ops[won].GetTryAcquire().GetOwner() || l.GetToken() == 0 {
		t.Errorf("op %d: lease %v, want a:1 of its owner with a token", won, l)
	}
	if got := reason(lost); got != v1.ErrorReason_NOT_ACQUIRED.String() {
		t.Errorf("op %d (a:1 held): reason %q", lost, got)
	}
	if res[2].GetExtended().GetTtl().AsDuration() != time.Minute {
		t.Errorf("op 2 (extend): %v", res[2])
	}
	if got := reason(3); got != v1.ErrorReason_NOT_HELD.String() {
		t.Errorf("op 3 (release by another owner): reason %q", got)
	}
	if got := reason(4); got != v1.ErrorReason_KEY_NOT_ALLOWED.String() {
		t.Errorf("op 4 (outside the prefix): reason %q", got)
	}
	if got := res[5].GetError().GetCode(); got != connect.CodeInvalidArgument.String() {
		t.Errorf("op 5 (empty): code %q, want invalid_argument", got)
	}
	if res[6].GetAcquired() == nil {
		t.Errorf("op 6 (after the failed ones): %v", res[6])
	}
	rel, err := c.locks.Batch(ctx, connect.NewRequest(&v1.BatchRequest{Ops: []*v1.BatchOp{releaseOp("a:0", "o0")}}))
	if err != nil || rel.Msg.Results[0].GetReleased() == nil {
		t.Fatalf("a batch of one Release: %v, %v", rel, err)
	}

	calls := func(method, code string) float64 {
		return metricValue(t, reg, "turnstile_serve_calls_total", map[string]string{"method": method, "code": code, "tenant": "alpha"})
	}
	for _, want := range []struct {
		method, code string
		n            float64
	}{
		{"TryAcquire", "ok", 3}, {"TryAcquire", "aborted", 1}, {"TryAcquire", "permission_denied", 1},
		{"Extend", "ok", 1}, {"Release", "ok", 1}, {"Release", "failed_precondition", 1},
		{"Batch", "ok", 3}, {"Batch", "invalid_argument", 1},
	} {
		if got := calls(want.method, want.code); got != want.n {
			t.Errorf("calls of %s %s: %v, want %v", want.method, want.code, got, want.n)
		}
	}
	if n := metricValue(t, reg, "turnstile_serve_call_seconds", map[string]string{"method": "TryAcquire"}); n != 5 {
		t.Errorf("TryAcquire latencies observed: %v, want 5", n)
	}

	// An empty batch answers nothing; one over 1,024 ops is refused whole.
	if r, err := c.locks.Batch(ctx, connect.NewRequest(&v1.BatchRequest{})); err != nil || len(r.Msg.Results) != 0 {
		t.Fatalf("empty batch: %v, %v", r, err)
	}
	big := make([]*v1.BatchOp, 1025)
	for i := range big {
		big[i] = tryOp("a:big", "o1")
	}
	if _, err := c.locks.Batch(ctx, connect.NewRequest(&v1.BatchRequest{Ops: big})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a batch of 1,025 ops: %v, want invalid_argument", err)
	}
}

// errorReason is the reason of res[i]'s error; it fails t when res[i]
// is no error.
func errorReason(t *testing.T, res []*v1.BatchResult, i int) string {
	t.Helper()
	e := res[i].GetError()
	if e == nil {
		t.Fatalf("op %d: %v, want an error", i, res[i])
	}
	return apierr.Reason(apierr.FromBatch(e))
}

// TestBatchExtends: the renewals of a batch on a store that renews many
// in one round trip (driver.BatchExtender) go to it in one call, and
// each is answered as its own Extend would be: renewed for its TTL,
// NOT_HELD for a lease not held, its own error for a request refused
// before the store; counted in the metrics one by one.
func TestBatchExtends(t *testing.T) {
	srv := testserver.StartRedis(t)
	cb := countingRedis(t, srv)
	reg := prometheus.NewRegistry()
	ts, bearer := tokens(t, map[string]string{"alpha": "lock a:"})
	in := startInstance(t, service.Config{Backend: cb, Registerer: reg, Tokens: ts})
	c := clientsOf(t, in.addr, withToken(bearer["alpha"]))
	ctx := ctxFor(t, 30*time.Second)
	batch := func(ops ...*v1.BatchOp) []*v1.BatchResult {
		t.Helper()
		r, err := c.locks.Batch(ctx, connect.NewRequest(&v1.BatchRequest{Ops: ops}))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Msg.Results) != len(ops) {
			t.Fatalf("%d results for %d ops", len(r.Msg.Results), len(ops))
		}
		return r.Msg.Results
	}
	// Two leases of one second, renewed for a minute.
	short := func(key string) *v1.BatchOp {
		op := tryOp(key, "o")
		op.GetTryAcquire().Ttl = durationpb.New(time.Second)
		return op
	}
	for i, r := range batch(short("a:1"), short("a:2")) {
		if r.GetAcquired() == nil {
			t.Fatalf("acquisition %d: %v", i, r)
		}
	}
	badTTL := extendOp("a:1", "o")
	badTTL.GetExtend().Ttl = durationpb.New(-time.Second)
	sent := time.Now()
	res := batch(
		extendOp("a:1", "o"),
		extendOp("a:3", "o"), // never held
		extendOp("a:2", "o"),
		extendOp("a:2", "someone else"),
		badTTL,
		extendOp("b:1", "o"), // outside the token's prefix
	)
	took := time.Since(sent)
	for _, i := range []int{0, 2} {
		e := res[i].GetExtended()
		if e.GetTtl().AsDuration() != time.Minute || e.GetValidity().AsDuration() <= 0 || e.GetValidity().AsDuration() > time.Minute {
			t.Errorf("op %d (a lease held): %v, want renewed for a minute", i, res[i])
		}
		if v := e.GetValidity().AsDuration(); v < time.Minute-took-time.Second {
			t.Errorf("op %d: validity %v after a call of %v", i, v, took)
		}
	}
	reason := func(i int) string {
		t.Helper()
		return errorReason(t, res, i)
	}
	for _, i := range []int{1, 3} {
		if got := reason(i); got != v1.ErrorReason_NOT_HELD.String() {
			t.Errorf("op %d (not held): reason %q", i, got)
		}
	}
	if got := res[4].GetError().GetCode(); got != connect.CodeInvalidArgument.String() {
		t.Errorf("op 4 (a negative TTL): code %q, want invalid_argument", got)
	}
	if got := reason(5); got != v1.ErrorReason_KEY_NOT_ALLOWED.String() {
		t.Errorf("op 5 (outside the prefix): reason %q", got)
	}
	// The four that reached the store did so in one call.
	if calls, reqs := cb.extends.calls.Load(), cb.extends.ops.Load(); calls != 1 || reqs != 4 {
		t.Errorf("ExtendMany: %d calls with %d renewals, want 1 with 4", calls, reqs)
	}
	for _, want := range []struct {
		code string
		n    float64
	}{{"ok", 2}, {"failed_precondition", 2}, {"invalid_argument", 1}, {"permission_denied", 1}} {
		got := metricValue(t, reg, "turnstile_serve_calls_total", map[string]string{"method": "Extend", "code": want.code, "tenant": "alpha"})
		if got != want.n {
			t.Errorf("Extend calls %s: %v, want %v", want.code, got, want.n)
		}
	}
	// Renewed on the store: held past the TTL they were granted with.
	time.Sleep(1500 * time.Millisecond)
	for i, r := range batch(tryOp("a:1", "p"), tryOp("a:2", "p")) {
		if got := apierr.Reason(apierr.FromBatch(r.GetError())); got != v1.ErrorReason_NOT_ACQUIRED.String() {
			t.Errorf("acquisition %d by another owner after the first TTL: %v, want NOT_ACQUIRED", i, r)
		}
	}
}

// TestCancelledBatchesLeaveNoLock: workers taking and releasing locks
// through the service, whose batches the instance makes in one store
// call (driver.Batcher: one pipelined write on Redis, one transaction on
// etcd), are stopped by cancelling their context at a moment of no
// particular kind, many times over. An acquisition whose caller gave up
// while its batch was on its way may still be granted; the releases
// that clean up after it (the Client's, by its owner id, and the
// store's own) must reach the store after it, so that once everything
// settled no lock is held.
func TestCancelledBatchesLeaveNoLock(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := testserver.StartRedis(t)
		cb := countingRedis(t, srv)
		cancelledBatches(t, cb, &cb.batchCount, func() (string, error) {
			return srv.Do("EVAL", `local n = {} for _, k in ipairs(redis.call('KEYS', '*')) do if not string.find(k, ':fence$') then n[#n+1] = k end end return table.concat(n, ' ')`, "0")
		})
	})
	t.Run("etcd", func(t *testing.T) {
		srv := testserver.StartEtcd(t)
		cb := countingEtcd(t, srv)
		raw, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Close() })
		prefix := cb.LockKey("")
		cancelledBatches(t, cb, &cb.batchCount, func() (string, error) {
			r, err := raw.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				return "", err
			}
			var keys []string
			for _, kv := range r.Kvs {
				keys = append(keys, string(kv.Key))
			}
			return strings.Join(keys, " "), nil
		})
	})
}

// cancelledBatches runs TestCancelledBatchesLeaveNoLock on store, whose
// DoMany calls c counts; held lists the locks held in the store.
func cancelledBatches(t *testing.T, store driver.Backend, c *batchCount, held func() (string, error)) {
	ctx := ctxFor(t, 2*time.Minute)
	in := startInstance(t, service.Config{Backend: store})
	const rounds = 30
	for round := range rounds {
		c, err := turnstile.Open(ctx, "turnstile://"+in.addr, turnstile.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := 0; wctx.Err() == nil; i++ {
					l, err := c.TryAcquire(wctx, "r"+strconv.Itoa(round)+":"+strconv.Itoa(w)+":"+strconv.Itoa(i))
					if err != nil {
						continue
					}
					if err := l.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		time.Sleep(time.Duration(5+round%20) * time.Millisecond)
		cancel()
		wg.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if c.calls.Load() == 0 {
		t.Fatal("no batch went through DoMany")
	}
	// The clean-up releases run in the background: give them time.
	var left string
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left, err = held(); err != nil {
			t.Fatal(err)
		}
		if left == "" {
			return
		}
	}
	t.Errorf("cancelled acquisitions left locks held: %s", left)
}
