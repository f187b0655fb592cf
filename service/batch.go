package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// maxBatch bounds the ops of one Batch.
const maxBatch = 1024

// Batch makes each op as its own call would be made, all at once (a
// store that pipelines, such as Redis through rueidis, then sends them
// together), and answers them in order. Each op is counted in the
// metrics under its own method, and against the token's rate.
func (h *locks) Batch(ctx context.Context, req *connect.Request[v1.BatchRequest]) (*connect.Response[v1.BatchResponse], error) {
	s, ops := h.s, req.Msg.Ops
	if len(ops) > maxBatch {
		return nil, toConnect(fmt.Errorf("%w: %d ops in one batch, over %d", turnstile.ErrInvalidOption, len(ops), maxBatch))
	}
	if err := s.check(); err != nil {
		return nil, toConnect(err)
	}
	// The call itself was admitted as one.
	if err := admitN(ctx, callerOf(ctx), len(ops)-1); err != nil {
		return nil, toConnect(err)
	}
	// Its ops run even if the instance starts draining meanwhile, as a
	// call admitted before the drain does: an op refused alone would
	// fail in its client, which moves on to the next instance only
	// when the whole call is refused.
	ctx = context.WithValue(ctx, admittedKey{}, true)
	out := make([]*v1.BatchResult, len(ops))
	tenant := callerName(ctx)
	start := time.Now()
	answer := func(i int, method string, r *v1.BatchResult, err error) {
		s.metrics.call(method, tenant, err, time.Since(start))
		if err != nil {
			r = &v1.BatchResult{Result: &v1.BatchResult_Error{Error: batchError(err)}}
		}
		out[i] = r
	}
	// Acquisitions and releases on a store that makes many in one round
	// trip (driver.Batcher) go to it together, on this goroutine;
	// renewals on a store that renews many in one (driver.BatchExtender)
	// go to it together, as one of the rest; every other op goes to a
	// pooled goroutine. With no Batcher call to make, the last of the
	// rest runs on this goroutine, which would only wait meanwhile: a
	// batch of one op (or of renewals alone) is made without a hand-off.
	var many manyOps
	var rest []func()
	for i, op := range ops {
		if f := many.add(ctx, s, i, op, answer); f != nil {
			rest = append(rest, f)
		}
	}
	if f := many.extendCall(ctx, s, answer); f != nil {
		rest = append(rest, f)
	}
	var wg sync.WaitGroup
	last := len(rest)
	if len(many.ops) == 0 && last > 0 {
		last--
	}
	wg.Add(last)
	for _, f := range rest[:last] {
		s.pool.run(func() {
			defer wg.Done()
			f()
		})
	}
	if last < len(rest) {
		rest[last]()
	}
	many.do(ctx, s, answer)
	wg.Wait()
	return connect.NewResponse(&v1.BatchResponse{Results: out}), nil
}

// manyOps are the acquisitions and releases of a batch that go to the
// store in one driver.Batcher call, and its renewals that go in one
// driver.BatchExtender call.
type manyOps struct {
	view *lockView // whose store is the Batcher
	ops  []driver.Op
	of   []manyOp // of[j] is what ops[j] answers

	extView *lockView // whose store is the BatchExtender
	exts    []driver.ExtendRequest
	extOf   []extendOp // extOf[j] is what exts[j] answers
}

// extendOp is the batch's op that a driver.ExtendRequest makes: its
// index in the batch, and its lease.
type extendOp struct {
	at    int
	lease *v1.Lease
}

// manyOp is the batch's op that a driver.Op makes: its index in the
// batch, and its TryAcquire's checks or its Release's request.
type manyOp struct {
	at  int
	try tryOp
	rel *v1.ReleaseRequest
}

// add checks the batch's op i: it answers a refused one, takes one for
// the Batcher, and returns the call of any other.
func (mo *manyOps) add(ctx context.Context, s *Server, i int, op *v1.BatchOp, answer func(int, string, *v1.BatchResult, error)) func() {
	switch o := op.GetOp().(type) {
	case *v1.BatchOp_TryAcquire:
		t, err := s.tryStart(ctx, o.TryAcquire)
		if err != nil {
			answer(i, "TryAcquire", nil, err)
			return nil
		}
		if mo.takes(t.v) {
			mo.ops = append(mo.ops, driver.Op{Kind: driver.OpAcquire, Key: t.m.Key, Owner: t.owner, TTL: t.ttl})
			mo.of = append(mo.of, manyOp{at: i, try: t})
			return nil
		}
		return func() {
			token, ok, since, err := driver.AcquireSince(ctx, t.v.store, t.m.Key, t.owner, t.ttl)
			r, err := s.tryEnd(t, token, ok, since, err)
			answer(i, "TryAcquire", &v1.BatchResult{Result: &v1.BatchResult_Acquired{Acquired: r}}, err)
		}
	case *v1.BatchOp_Extend:
		m := o.Extend
		v, ttl, err := s.extendStart(ctx, m)
		if err != nil {
			answer(i, "Extend", nil, err)
			return nil
		}
		if mo.extends(v) {
			mo.exts = append(mo.exts, driver.ExtendRequest{Key: m.Lease.Key, Owner: m.Lease.Owner, TTL: ttl})
			mo.extOf = append(mo.extOf, extendOp{at: i, lease: m.Lease})
			return nil
		}
		return func() {
			r, err := s.extendOn(ctx, v, m.Lease, ttl)
			answer(i, "Extend", &v1.BatchResult{Result: &v1.BatchResult_Extended{Extended: r}}, err)
		}
	case *v1.BatchOp_Release:
		m := o.Release
		v, n, err := s.releaseStart(ctx, m)
		if err != nil {
			answer(i, "Release", nil, err)
			return nil
		}
		if mo.takes(v) {
			mo.ops = append(mo.ops, driver.Op{Kind: driver.OpRelease, Key: m.Lease.Key, Owner: m.Lease.Owner, Notice: n})
			mo.of = append(mo.of, manyOp{at: i, rel: m})
			return nil
		}
		return func() {
			ok, tried, err := driver.ReleaseNotice(ctx, v.store, m.Lease.Key, m.Lease.Owner, n)
			r, err := s.releaseEnd(v, m, ok, tried, err)
			answer(i, "Release", &v1.BatchResult{Result: &v1.BatchResult_Released{Released: r}}, err)
		}
	}
	return func() {
		answer(i, "Batch", nil, fmt.Errorf("%w: an op of a batch is none of try_acquire, extend, release", turnstile.ErrInvalidOption))
	}
}

// extends reports whether a renewal on v goes to the BatchExtender: the
// first view of the batch whose store is one, and only that view.
func (mo *manyOps) extends(v *lockView) bool {
	if mo.extView == nil {
		if _, ok := v.store.(driver.BatchExtender); ok {
			mo.extView = v
		}
	}
	return mo.extView == v
}

// extendCall returns the call that makes the renewals taken in one call
// of the BatchExtender and answers them; nil when none was taken.
func (mo *manyOps) extendCall(ctx context.Context, s *Server, answer func(int, string, *v1.BatchResult, error)) func() {
	if len(mo.exts) == 0 {
		return nil
	}
	return func() {
		sent := time.Now()
		for j, r := range mo.extView.store.(driver.BatchExtender).ExtendMany(ctx, mo.exts) {
			op := mo.extOf[j]
			resp, err := s.extendEnd(mo.extView, op.lease, mo.exts[j].TTL, sent, r.OK, r.Err)
			answer(op.at, "Extend", &v1.BatchResult{Result: &v1.BatchResult_Extended{Extended: resp}}, err)
		}
	}
}

// takes reports whether an op on v goes to the Batcher: the first view
// of the batch whose store is one, and only that view.
func (mo *manyOps) takes(v *lockView) bool {
	if mo.view == nil {
		if _, ok := v.store.(driver.Batcher); ok {
			mo.view = v
		}
	}
	return mo.view == v
}

// do makes the ops taken in one call of the Batcher and answers them.
func (mo *manyOps) do(ctx context.Context, s *Server, answer func(int, string, *v1.BatchResult, error)) {
	if len(mo.ops) == 0 {
		return
	}
	for j, r := range mo.view.store.(driver.Batcher).DoMany(ctx, mo.ops) {
		op := mo.of[j]
		if op.rel != nil {
			resp, err := s.releaseEnd(mo.view, op.rel, r.OK, r.Tried, r.Err)
			answer(op.at, "Release", &v1.BatchResult{Result: &v1.BatchResult_Released{Released: resp}}, err)
			continue
		}
		resp, err := s.tryEnd(op.try, r.Token, r.OK, r.Since, r.Err)
		answer(op.at, "TryAcquire", &v1.BatchResult{Result: &v1.BatchResult_Acquired{Acquired: resp}}, err)
	}
}

// admittedKey marks the context of a batch's ops: the batch was admitted
// as a call, so they are not refused for a drain that began meanwhile.
type admittedKey struct{}

func admitted(ctx context.Context) bool {
	_, ok := ctx.Value(admittedKey{}).(bool)
	return ok
}

// batchError is err as a batch answers it: what its own call would have
// ended with.
func batchError(err error) *v1.BatchError {
	ce := toConnect(err).(*connect.Error)
	return &v1.BatchError{Code: ce.Code().String(), Reason: apierr.Reason(ce), Message: ce.Message()}
}
