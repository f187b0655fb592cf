package remote

import (
	"context"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Auto-batching. TryAcquire, Extend and Release of every goroutine share
// at most maxInFlight Batch calls on their way at once. An op that finds
// a call free and nothing queued goes out at once, alone, on its own
// goroutine: a lone caller waits no longer than with a call of its own,
// and no other goroutine is woken for it. Under load the ops queue while
// the calls are busy, and whichever call ends first takes everything
// queued as its next batch, so that 64 goroutines cost the instance a
// few calls, not 64 — as rueidis pipelines commands to Redis.
//
// A batch that follows another is sent by one of maxInFlight sender
// goroutines that live as long as the conn: a goroutine made per batch
// would grow its stack, by copying, to the depth of an HTTP/2 call every
// time.

const (
	maxInFlight = 2
	maxOps      = 1024
	// batchTimeout bounds a batch whose ops have no deadline.
	batchTimeout = 30 * time.Second
)

// pendingOp is one op waiting in the queue for its batch's answer.
type pendingOp struct {
	ctx  context.Context
	op   *v1.BatchOp
	done chan opResult
}

type opResult struct {
	r   *v1.BatchResult
	err error
}

// batcherState is whether a batcher still sends.
type batcherState int

const (
	batcherOpen batcherState = iota
	batcherClosed
)

// batcher sends the ops of one conn.
type batcher struct {
	c *conn

	mu    sync.Mutex
	state batcherState
	queue []*pendingOp
	// busy is how many of the maxInFlight calls are taken: on their way,
	// or handed to a sender. Ops queue only while all are: the holder of
	// a call takes the queue when its own batch ends.
	busy int

	// next carries a batch to an idle sender, its call already taken.
	next chan []*pendingOp
	quit chan struct{}
}

func newBatcher(c *conn) *batcher {
	b := &batcher{c: c, next: make(chan []*pendingOp, maxInFlight), quit: make(chan struct{})}
	for range maxInFlight {
		go b.sender()
	}
	return b
}

// do makes op in a batch and returns its result: the result's error
// (BatchError) is the op's own; err is the batch's (the instance could
// not be reached, or ctx ended first).
func (b *batcher) do(ctx context.Context, op *v1.BatchOp) (*v1.BatchResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.state == batcherClosed {
		b.mu.Unlock()
		return nil, errClosedConn
	}
	// An acquisition whose caller gives up once it is on its way waits
	// for its answer (settleWait at most): the instance may still grant
	// it, and the release the caller sends to clean up must reach the
	// store after the grant, not overtake it on the other call.
	settle := op.GetTryAcquire() != nil
	if b.busy < maxInFlight {
		// Nothing is queued: ops queue only while every call is taken.
		b.busy++
		b.mu.Unlock()
		r, err := b.alone(ctx, op, settle)
		b.handOver(true)
		return r, err
	}
	p := pendingOps.Get().(*pendingOp)
	p.ctx, p.op = ctx, op
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case r := <-p.done:
		// Its one answer is taken: nothing refers to p any more.
		p.ctx, p.op = nil, nil
		pendingOps.Put(p)
		return r.r, r.err
	case <-ctx.Done():
	}
	if settle && !b.unqueue(p) {
		// Taken into a batch: sent, or answered at once as not sent.
		t := time.NewTimer(settleWait)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}
	return nil, ctx.Err()
}

// settleWait bounds how long an acquisition whose caller gave up still
// waits for its batch's answer.
const settleWait = time.Second

// unqueue takes p out of the queue if it is still there: it is then
// never sent.
func (b *batcher) unqueue(p *pendingOp) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.queue, p); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		return true
	}
	return false
}

// pendingOps keeps the pendingOps whose answer was taken, for the next
// ops to queue. One that gave up before its answer came is left to the
// garbage collector: its answer may still be sent.
var pendingOps = sync.Pool{New: func() any { return &pendingOp{done: make(chan opResult, 1)} }}

// alone sends op as a batch of its own, under the caller's ctx; with
// settle, the call goes on up to settleWait after ctx ends, for its
// answer, and then fails with ctx's error.
func (b *batcher) alone(ctx context.Context, op *v1.BatchOp, settle bool) (*v1.BatchResult, error) {
	callCtx := ctx
	if settle {
		sctx, stop := settling(ctx)
		defer stop()
		callCtx = sctx
	}
	bctx, cancel := batchContext(callCtx)
	defer cancel()
	results, err := b.c.batch(bctx, []*v1.BatchOp{op})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if settle && ctx.Err() != nil {
		// Its caller has gone: it cleans up after the acquisition.
		return nil, ctx.Err()
	}
	return results[0], nil
}

// settling returns a context that ends settleWait after ctx does, or
// when stop is called, and has ctx's deadline plus settleWait.
func settling(ctx context.Context) (sctx context.Context, stop func()) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var cancelDeadline context.CancelFunc = func() {}
	if dl, ok := ctx.Deadline(); ok {
		sctx, cancelDeadline = context.WithDeadline(sctx, dl.Add(settleWait))
	}
	unwatch := context.AfterFunc(ctx, func() {
		// Once stop ran, the timer's cancel is a no-op.
		time.AfterFunc(settleWait, func() { cancel(context.Cause(ctx)) })
	})
	return sctx, func() {
		unwatch()
		cancelDeadline()
		cancel(nil)
	}
}

// batchContext bounds a call that has no deadline, or one further than
// batchTimeout, by batchTimeout: an instance that never answers does not
// keep one of the calls for ever.
func batchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= batchTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, batchTimeout)
}

// handOver is called by the holder of a call whose batch ended: it
// returns the next batch to send on that call, or frees the call when
// nothing is queued (or the batcher is closed). toSender gives that
// batch to an idle sender instead, under the lock, so that close finds
// it: a caller that sent its own op alone returns to its own work.
func (b *batcher) handOver(toSender bool) []*pendingOp {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 || b.state == batcherClosed {
		b.busy--
		return nil
	}
	n := min(len(b.queue), maxOps)
	batch := b.queue[:n:n]
	if n == len(b.queue) {
		b.queue = nil
	} else {
		b.queue = b.queue[n:]
	}
	if toSender {
		// Never blocks: each batch in next holds one of the
		// maxInFlight calls, and next has room for as many.
		b.next <- batch
		return nil
	}
	return batch
}

// sender sends the batches handed to it, and what queues meanwhile.
func (b *batcher) sender() {
	for {
		select {
		case batch := <-b.next:
			for batch != nil {
				b.send(batch)
				batch = b.handOver(false)
			}
		case <-b.quit:
			return
		}
	}
}

func fail(batch []*pendingOp, err error) {
	for _, p := range batch {
		p.done <- opResult{err: err}
	}
}

// send makes one Batch call of batch's ops that are still wanted. The
// call outlives any one op's context: it ends by the latest deadline of
// its ops, bounded by batchTimeout.
func (b *batcher) send(batch []*pendingOp) {
	ops := make([]*v1.BatchOp, 0, len(batch))
	live := batch[:0:0]
	var latest time.Time
	bounded := true
	for _, p := range batch {
		if p.ctx.Err() != nil {
			p.done <- opResult{err: p.ctx.Err()}
			continue
		}
		ops = append(ops, p.op)
		live = append(live, p)
		if dl, ok := p.ctx.Deadline(); !ok {
			bounded = false
		} else if dl.After(latest) {
			latest = dl
		}
	}
	if len(live) == 0 {
		return
	}
	if !bounded || time.Until(latest) > batchTimeout {
		latest = time.Now().Add(batchTimeout)
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	defer cancel()
	results, err := b.c.batch(ctx, ops)
	for i, p := range live {
		if err != nil {
			p.done <- opResult{err: err}
			continue
		}
		p.done <- opResult{r: results[i]}
	}
}

// batch makes one Batch call on the instances in turn (client.go).
func (c *conn) batch(ctx context.Context, ops []*v1.BatchOp) ([]*v1.BatchResult, error) {
	req := &v1.BatchRequest{Ops: ops}
	return call(ctx, c, func(in *instance) ([]*v1.BatchResult, error) {
		actx, cancel := c.attempt(ctx)
		defer cancel()
		r, err := c.batchClient(in).Batch(actx, connect.NewRequest(req))
		c.batchEnded()
		if err != nil {
			return nil, noAnswer(ctx, actx, in.addr, err)
		}
		if len(r.Msg.Results) != len(ops) {
			return nil, errBatchAnswer
		}
		return r.Msg.Results, nil
	})
}

// opReason reports whether r is the op's own error of reason want: the
// answers an op expects (a lock taken, a lease gone), read without
// making the error they would be as a call's.
func opReason(r *v1.BatchResult, want v1.ErrorReason) bool {
	e := r.GetError()
	return e != nil && e.GetReason() == want.String()
}

// opError is the op's own error in r, or nil.
func opError(r *v1.BatchResult) error {
	if e := r.GetError(); e != nil {
		return apierr.FromBatch(e)
	}
	return nil
}

// close fails every op not yet sent and stops the senders, as soon as
// each has ended the batch on its way, if any; close does not wait for
// that batch's answer.
func (b *batcher) close() {
	b.mu.Lock()
	if b.state == batcherClosed {
		b.mu.Unlock()
		return
	}
	b.state = batcherClosed
	unsent := [][]*pendingOp{b.queue}
	b.queue = nil
drain:
	for {
		select {
		case batch := <-b.next:
			unsent = append(unsent, batch)
		default:
			break drain
		}
	}
	b.mu.Unlock()
	for _, batch := range unsent {
		fail(batch, errClosedConn)
	}
	close(b.quit)
}
