package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
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
	do := func(i int) {
		start := time.Now()
		r, method, err := s.batchOp(ctx, ops[i])
		s.metrics.call(method, tenant, err, time.Since(start))
		if err != nil {
			r = &v1.BatchResult{Result: &v1.BatchResult_Error{Error: batchError(err)}}
		}
		out[i] = r
	}
	// Every op but the last goes to a pooled goroutine; the last runs on
	// this one, which would only wait meanwhile: a batch of one op is
	// made without a hand-off at all.
	if n := len(ops); n > 0 {
		var wg sync.WaitGroup
		wg.Add(n - 1)
		for i := range n - 1 {
			s.pool.run(func() {
				defer wg.Done()
				do(i)
			})
		}
		do(n - 1)
		wg.Wait()
	}
	return connect.NewResponse(&v1.BatchResponse{Results: out}), nil
}

// admittedKey marks the context of a batch's ops: the batch was admitted
// as a call, so they are not refused for a drain that began meanwhile.
type admittedKey struct{}

func admitted(ctx context.Context) bool {
	_, ok := ctx.Value(admittedKey{}).(bool)
	return ok
}

// batchOp makes one op and returns its result, and its method's name for
// the metrics.
func (s *Server) batchOp(ctx context.Context, op *v1.BatchOp) (*v1.BatchResult, string, error) {
	switch o := op.GetOp().(type) {
	case *v1.BatchOp_TryAcquire:
		r, err := s.tryAcquire(ctx, o.TryAcquire)
		return &v1.BatchResult{Result: &v1.BatchResult_Acquired{Acquired: r}}, "TryAcquire", err
	case *v1.BatchOp_Extend:
		r, err := s.extend(ctx, o.Extend)
		return &v1.BatchResult{Result: &v1.BatchResult_Extended{Extended: r}}, "Extend", err
	case *v1.BatchOp_Release:
		r, err := s.release(ctx, o.Release)
		return &v1.BatchResult{Result: &v1.BatchResult_Released{Released: r}}, "Release", err
	}
	return nil, "Batch", fmt.Errorf("%w: an op of a batch is none of try_acquire, extend, release", turnstile.ErrInvalidOption)
}

// batchError is err as a batch answers it: what its own call would have
// ended with.
func batchError(err error) *v1.BatchError {
	ce := toConnect(err).(*connect.Error)
	return &v1.BatchError{Code: ce.Code().String(), Reason: apierr.Reason(ce), Message: ce.Message()}
}
