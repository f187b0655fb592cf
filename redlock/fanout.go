package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// answer is one node's reply to one call: yes (granted, extended,
// released, raised), no (held by another owner, or not held by this one),
// or an error, which leaves the outcome on that node unknown.
type answer struct {
	node  int
	yes   bool
	token uint64
	err   error
}

// Node states within a round.
const (
	stateNotAsked uint8 = iota
	statePending        // asked, no answer yet
	stateYes
	stateNo
	stateFailed   // answered with an error
	stateTimedOut // no answer within the node timeout; it may still come
)

// round is one call sent to several nodes at once, each in a goroutine of
// its own with the node timeout. Answers arrive on a channel with room for
// all of them, so a node that answers after the outcome was decided never
// blocks, and whoever finishes the round later (a cleanup) reads them.
type round struct {
	op      string
	timeout time.Duration
	answers chan answer
	unread  int     // answers not yet taken from the channel
	state   []uint8 // by node index
	tokens  []uint64
	errs    []error

	// refusable marks a round over every node whose "no" answers are a
	// result of their own — not acquired, not held — as opposed to a
	// failure: wait then also waits until it is known which of the two
	// rules a quorum out (see decided). A round whose every shortfall is
	// an error (the fence write-back) has it cleared.
	refusable bool

	yes, no, failed, pending int
}

// start sends call to the nodes numbered in ask, in parallel. Each call
// gets a context that ends after timeout.
func (b *Backend) start(ctx context.Context, op string, timeout time.Duration, ask []int, call func(context.Context, *node) answer) *round {
	r := &round{
		op:      op,
		timeout: timeout,
		answers: make(chan answer, len(ask)),
		state:   make([]uint8, len(b.nodes)),
		tokens:  make([]uint64, len(b.nodes)),
		unread:  len(ask),
		pending: len(ask),
		// Its caller clears it for a round whose refusals mean nothing
		// of their own (writeBack).
		refusable: true,
	}
	// One context for all the round's calls, ended when the last returns.
	nctx, stop := nodeContext(ctx, timeout)
	var running atomic.Int32
	running.Store(int32(len(ask)))
	finish := func(a answer) {
		if running.Add(-1) == 0 {
			stop()
		}
		r.answers <- a
	}
	for _, i := range ask {
		r.state[i] = statePending
		n := &b.nodes[i]
		ok := b.spawn(func() {
			a := call(nctx, n)
			a.err = nodeError(ctx, nctx, a.err)
			a.node = i
			finish(a)
		})
		if !ok {
			finish(answer{node: i, err: errClosed})
		}
	}
	if len(ask) == 0 {
		stop()
	}
	return r
}

// wait takes answers until the outcome is decided (see decided) or, with
// WithWaitAll, until every node answered; in both cases at most until
// deadline. Nodes that have not answered by then count as failed with
// ErrNodeTimeout.
//
// need 0 waits for every node, whatever the setting.
func (r *round) wait(b *Backend, need int, deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for r.pending > 0 {
		if need > 0 && !b.cfg.waitAll && r.decided(need) {
			return
		}
		select {
		case a := <-r.answers:
			r.take(b, a)
		case <-timer.C:
			r.expire(b)
			return
		}
	}
}

// expire counts the nodes that have not answered as failed.
func (r *round) expire(b *Backend) {
	for i, s := range r.state {
		if s == statePending {
			r.state[i] = stateTimedOut
			r.pending--
			r.failed++
			r.errs = append(r.errs, &NodeError{Node: b.nodes[i].name, Err: fmt.Errorf("%w (%v)", ErrNodeTimeout, r.timeout)})
		}
	}
}

// decided reports whether the outcome is known before every node
// answered: need nodes said yes, or too few are left to get there — and,
// in a refusable round, also which of the two kinds of "no" it is: a
// definite refusal (refusedByNodes) or an unknown outcome. It is a
// definite refusal once more than N − need nodes said no and need nodes
// answered; it is unknown once no pending answers could make it one:
// even if every pending node said no, the refusals would stay at N − need
// or fewer (that is, yes + failed ≥ need), or more than N − need nodes
// failed, so that fewer than need can answer. Between the two, the
// pending answers decide which it is, and wait takes them, at most until
// the node timeout. With an odd N, a round with no failed node is never in
// between: once too few nodes are left for a quorum of yes, more than
// N − need said no, and so at least need answered; the fast path of a
// contended key is unchanged, and only a failed node makes wait take more
// answers. With an even N it takes need answers, one more than the
// N − need + 1 refusals that rule the quorum out.
func (r *round) decided(need int) bool {
	if r.yes >= need {
		return true
	}
	if r.yes+r.pending >= need {
		return false
	}
	if !r.refusable {
		return true
	}
	spare := len(r.state) - need // how many nodes can say no, or fail, with a quorum still possible
	return r.refusedByNodes(need) || r.no+r.pending <= spare || r.failed > spare
}

// refusedByNodes reports whether the round is a definite refusal: the
// nodes that said no are, on their own, more than a quorum can spare, so
// no answers the other nodes could give, nor could have given, would have
// made a quorum of yes; and a quorum of nodes answered, so the nodes are
// up to decide at all. The second part only matters for an even number
// of nodes: with 4 nodes (quorum 3), 2 refusals rule a quorum out, but
// with the 2 other nodes failed no quorum could have answered either, and
// that is a lost quorum, not a key held elsewhere.
func (r *round) refusedByNodes(quorum int) bool {
	return r.no > len(r.state)-quorum && r.yes+r.no >= quorum
}

// take files one answer that arrived in time.
func (r *round) take(b *Backend, a answer) {
	r.unread--
	r.pending--
	switch {
	case a.err != nil:
		r.state[a.node] = stateFailed
		r.failed++
		r.errs = append(r.errs, &NodeError{Node: b.nodes[a.node].name, Err: a.err})
	case a.yes:
		r.state[a.node] = stateYes
		r.tokens[a.node] = a.token
		r.yes++
	default:
		r.state[a.node] = stateNo
		r.no++
	}
}

// late takes every answer not read yet, waiting for the calls still
// running, and passes each to f. Only cleanups call it, after the round's
// outcome is settled.
func (r *round) late(f func(answer)) {
	for ; r.unread > 0; r.unread-- {
		f(<-r.answers)
	}
}

// verdict turns a settled round into the result of a driver call: yes
// from a quorum; a definite no when so many nodes said no that the others
// could not have made a quorum, and a quorum answered (refusedByNodes);
// otherwise a QuorumError, as the outcome is unknown: a failed or silent
// node might have said yes.
func (r *round) verdict(b *Backend) (bool, error) {
	if r.yes >= b.quorum {
		return true, nil
	}
	if r.refusedByNodes(b.quorum) {
		return false, nil
	}
	return false, r.quorumError(b)
}

// refused turns a settled acquisition round into the error of its vote:
// nil when a quorum granted the lock, or — a plain "not acquired": other
// owners hold the key — when the refusals alone rule a quorum out
// (refusedByNodes); a QuorumError when failed or silent nodes are what
// keep the quorum out of reach, however many refused: had they answered
// yes, it might have been reached, and a caller that took such a round
// for "held by someone else" would take a store without a quorum for a
// healthy one. Without a quorum, abandon takes care of every grant the
// round may have made.
func (r *round) refused(b *Backend) error {
	if r.yes >= b.quorum || r.refusedByNodes(b.quorum) {
		return nil
	}
	return r.quorumError(b)
}

func (r *round) quorumError(b *Backend) *QuorumError {
	e := &QuorumError{Op: r.op, Nodes: len(b.nodes), Quorum: b.quorum, Yes: r.yes, No: r.no, Failed: r.failed, Pending: r.pending}
	if len(r.errs) > 0 {
		e.Err = errors.Join(r.errs...)
	}
	return e
}

// observe reports a decided round to the quorum observer, if any:
// reached is false when the round lacked answering nodes.
func (b *Backend) observe(ctx context.Context, op string, reached bool) {
	if b.cfg.onQuorum != nil && ctx.Err() == nil {
		b.cfg.onQuorum(op, reached)
	}
}

// errTimedOut is the cause of a node call's context when the node timeout
// passed.
var errTimedOut = errors.New("redlock: node timeout")

// nodeContext is parent for node calls that must end after timeout.
// The limit is enforced by cancelling, not by a deadline: a client may
// tear down a connection whose call passed its deadline (rueidis does,
// for a call it sent alone), and the calls queued behind it — the release
// that must follow a late grant — would go with it. A cancelled call is
// only abandoned by the client, and still runs on the server in order.
func nodeContext(parent context.Context, timeout time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stopParent := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	timer := time.AfterFunc(timeout, func() { cancel(errTimedOut) })
	return ctx, func() {
		timer.Stop()
		stopParent()
		cancel(context.Canceled)
	}
}

// nodeError makes the error of a node call say why its context ended: the
// node timeout (ErrNodeTimeout), or the caller's own context.
func nodeError(parent, nctx context.Context, err error) error {
	if err == nil || nctx.Err() == nil {
		return err
	}
	if context.Cause(nctx) == errTimedOut {
		return ErrNodeTimeout
	}
	if parent.Err() != nil && errors.Is(err, context.Canceled) {
		return context.Cause(parent)
	}
	return err
}
