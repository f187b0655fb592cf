package redis

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// DoMany implements driver.Batcher: the ops' scripts — those Acquire and
// ReleaseNotice run — go to Redis in one pipelined write, and each op's
// result is what its own call would have returned. They usually run in
// their order, but not always: one the server refuses with NOSCRIPT (it
// lost its scripts) runs again alone after the others. The
// acquisitions share one reading of the server clock, and the batch
// waits for its replies as an acquisition does once the caller's context
// has ended (settleWait), so that the releases a caller sends after
// giving up reach the server after its scripts. With WithWaitReplicas
// each op is made by its own call, all at once.
func (b *Backend) DoMany(ctx context.Context, ops []driver.Op) []driver.OpResult {
	res := make([]driver.OpResult, len(ops))
	if b.waits() {
		var wg sync.WaitGroup
		for i, op := range ops {
			wg.Go(func() { res[i] = b.doOne(ctx, op) })
		}
		wg.Wait()
		return res
	}
	own := int64(0)
	if slices.ContainsFunc(ops, func(op driver.Op) bool { return op.Kind == driver.OpAcquire }) {
		own = b.clock.now(ctx, b.conn) // sampled again when stale
	}
	if err := ctx.Err(); err != nil {
		// Nothing was sent.
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	calls := make([]scriptCall, 0, len(ops))
	index := make([]int, 0, len(ops)) // calls[j] is ops[index[j]]
	for i, op := range ops {
		if op.Key == "" {
			res[i].Err = errEmptyKey
			continue
		}
		switch op.Kind {
		case driver.OpAcquire:
			calls = append(calls, scriptCall{acquireScript, b.acquireCall(op.Key, op.Owner, op.TTL, 0, own)})
		case driver.OpRelease:
			calls = append(calls, scriptCall{releaseScript, b.releaseCall(op.Key, op.Owner, noticeArg(op.Notice))})
		default:
			res[i].Err = errOpKind(op.Kind)
			continue
		}
		index = append(index, i)
	}
	if len(calls) == 0 {
		return res
	}
	sctx, stop := settling(ctx)
	reps := b.conn.evalMany(sctx, calls)
	stop()
	for j, rep := range reps {
		i := index[j]
		r := &res[i]
		if ops[i].Kind == driver.OpAcquire {
			r.Token, r.OK, r.Err = b.acquired(ctx, rep.n, rep.err)
		} else {
			r.OK, r.Tried, r.Err = rep.n >= 1, rep.n == 2, rep.err
		}
	}
	return res
}

// doOne makes op by its own call.
func (b *Backend) doOne(ctx context.Context, op driver.Op) (r driver.OpResult) {
	switch op.Kind {
	case driver.OpAcquire:
		r.Token, r.OK, r.Err = b.Acquire(ctx, op.Key, op.Owner, op.TTL)
	case driver.OpRelease:
		r.OK, r.Tried, r.Err = b.ReleaseNotice(ctx, op.Key, op.Owner, op.Notice)
	default:
		r.Err = errOpKind(op.Kind)
	}
	return r
}

func errOpKind(k driver.OpKind) error {
	return fmt.Errorf("%w: op kind %d is neither acquire nor release", turnstile.ErrInvalidOption, k)
}
