package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// DoMany implements driver.Batcher: the writes of the ops — those
// AcquireSince and Release make — join the backend's line of writes
// together (see batch.go), and when the line may send one more
// transaction they leave at once as one, on the caller's goroutine.
// Each op's result is what its own call would have returned, by the
// same rules: a write that another owner's write on its key is busy
// with goes beside it alone, and one owner's writes on a key keep their
// order. The acquisitions renew each shared lease they write under at
// most once, beside their transaction, when AcquireSince would. A
// release that hands the lock to a waiter of the backend's own, and an
// acquisition that finds its lease ended on the server, is made by its
// own call.
func (b *Backend) DoMany(ctx context.Context, ops []driver.Op) []driver.OpResult {
	res := make([]driver.OpResult, len(ops))
	if err := ctx.Err(); err != nil {
		// Nothing is sent.
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	var (
		wg     sync.WaitGroup
		writes []*write
		of     []int                        // writes[j] is ops[of[j]]'s
		tries  = make([]*attempt, len(ops)) // by op; nil for a release
		renew  = map[*sharedLease]bool{}    // whether to renew each lease
	)
	for i, op := range ops {
		lk := b.LockKey(op.Key)
		switch op.Kind {
		case driver.OpAcquire:
			a, err := b.newAttempt(ctx, lk, op.Owner, op.TTL)
			if err != nil {
				res[i].Err = permission(err, "take the lock "+lk)
				continue
			}
			tries[i] = a
			renew[a.l] = renew[a.l] || a.renews(true)
			writes, of = append(writes, a.w), append(of, i)
		case driver.OpRelease:
			if w := b.waiting.first(op.Key); w != nil && w.lease.usable(time.Now()) {
				// A handoff to the backend's own waiter: its own call.
				wg.Go(func() {
					res[i].OK, res[i].Err = b.Release(ctx, op.Key, op.Owner)
					res[i].Tried = true
				})
				continue
			}
			writes, of = append(writes, deleteWrite(lk, op.Owner, "")), append(of, i)
		default:
			res[i].Err = fmt.Errorf("%w: op kind %d is neither acquire nor release", turnstile.ErrInvalidOption, op.Kind)
		}
	}
	renewed := make(map[*sharedLease]<-chan error, len(renew))
	for l, r := range renew {
		renewed[l] = b.renewing(ctx, l, !r)
	}
	answers := b.txns(ctx, writes)
	rerrs := make(map[*sharedLease]error, len(renewed))
	for l, ch := range renewed {
		rerrs[l] = <-ch
	}
	for j, a := range answers {
		i, op := of[j], ops[of[j]]
		r := &res[i]
		if t := tries[i]; t != nil {
			if a.err != nil || rerrs[t.l] != nil {
				// Failed, or its lease ended: ended on a goroutine of its
				// own, which may drop the key or try again.
				wg.Go(func() { *r = b.endMany(ctx, op, t, a, rerrs[t.l]) })
				continue
			}
			*r = b.endMany(ctx, op, t, a, nil)
			continue
		}
		r.OK, r.Err = deleted(a.resp, a.err)
		r.Tried = true
		if r.Err == nil {
			b.untrack(b.LockKey(op.Key), op.Owner)
		}
		r.Err = permission(r.Err, "release the lock "+b.LockKey(op.Key))
	}
	wg.Wait()
	return res
}

// endMany ends DoMany's acquisition op, attempt a, as AcquireSince would:
// on a new lease when a's ended on the server.
func (b *Backend) endMany(ctx context.Context, op driver.Op, a *attempt, w writeAnswer, rerr error) (r driver.OpResult) {
	var again bool
	r.Token, r.OK, r.Since, again, r.Err = b.endAttempt(ctx, a, w.resp, w.err, rerr)
	if again {
		r.Token, r.OK, r.Since, r.Err = b.acquireFrom(ctx, op.Key, op.Owner, op.TTL, true, 2)
		return r
	}
	r.Err = permission(r.Err, "take the lock "+a.lk)
	return r
}

var _ driver.Batcher = (*Backend)(nil)
