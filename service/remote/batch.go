package remote

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Auto-batching. TryAcquire, Extend and Release of every goroutine go
// through one queue; a sender takes what is queued and sends it as one
// Batch call, with up to maxInFlight batches on their way at once. An op
// that finds the queue empty and a slot free goes out at once, alone: a
// lone caller waits no longer than with a call of its own. Under load
// the ops queue while the slots are busy and leave together, so that 64
// goroutines cost the instance a few calls, not 64 — as rueidis
// pipelines commands to Redis.

const (
	maxInFlight = 2
	maxOps      = 1024
	// batchTimeout bounds a batch whose ops have no deadline.
	batchTimeout = 30 * time.Second
)

// pendingOp is one op waiting for its batch's answer.
type pendingOp struct {
	ctx  context.Context
	op   *v1.BatchOp
	done chan opResult
}

type opResult struct {
	r   *v1.BatchResult
	err error
}

// batcher sends the ops of one conn.
type batcher struct {
	c     *conn
	queue chan *pendingOp
	slots chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

func newBatcher(c *conn) *batcher {
	b := &batcher{c: c, queue: make(chan *pendingOp, maxOps), slots: make(chan struct{}, maxInFlight), quit: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// do makes op in a batch and returns its result: the result's error
// (BatchError) is the op's own; err is the batch's (the instance could
// not be reached, or ctx ended first).
func (b *batcher) do(ctx context.Context, op *v1.BatchOp) (*v1.BatchResult, error) {
	p := &pendingOp{ctx: ctx, op: op, done: make(chan opResult, 1)}
	select {
	case b.queue <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errClosedConn
	}
	select {
	case r := <-p.done:
		return r.r, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *batcher) run() {
	defer close(b.done)
	for {
		var first *pendingOp
		select {
		case first = <-b.queue:
		case <-b.quit:
			return
		}
		batch := []*pendingOp{first}
	gather:
		for len(batch) < maxOps {
			// Everything queued already goes with it; then it leaves as
			// soon as a slot is free, taking what queues meanwhile.
			select {
			case p := <-b.queue:
				batch = append(batch, p)
				continue
			default:
			}
			select {
			case p := <-b.queue:
				batch = append(batch, p)
			case b.slots <- struct{}{}:
				break gather
			case <-b.quit:
				fail(batch, errClosedConn)
				return
			}
		}
		if len(batch) == maxOps {
			select {
			case b.slots <- struct{}{}:
			case <-b.quit:
				fail(batch, errClosedConn)
				return
			}
		}
		go func() {
			defer func() { <-b.slots }()
			b.send(batch)
		}()
	}
}

func fail(batch []*pendingOp, err error) {
	for _, p := range batch {
		p.done <- opResult{err: err}
	}
}

// send makes one Batch call of batch's ops that are still wanted.
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
		r, err := in.locks.Batch(actx, connect.NewRequest(req))
		if err != nil {
			return nil, noAnswer(ctx, actx, in.addr, err)
		}
		if len(r.Msg.Results) != len(ops) {
			return nil, errBatchAnswer
		}
		return r.Msg.Results, nil
	})
}

// opError is the op's own error in r, or nil.
func opError(r *v1.BatchResult) error {
	if e := r.GetError(); e != nil {
		return apierr.FromBatch(e)
	}
	return nil
}

func (b *batcher) close() {
	close(b.quit)
	<-b.done
}
