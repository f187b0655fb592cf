package redlock

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/turnstilelock/turnstile/driver"
)

// Calls of one owner on one key must reach each node in the order they
// were made: a release that overtakes a late grant would leave the grant
// in place for a whole TTL, blocking everyone else on that node. The
// goroutines of two calls race, so the order is kept here: work that an
// early return left running is tracked per key and owner, and later calls
// wait for it or hand their part to it.

// abandon releases a failed acquisition on every node that may hold it:
// at once on the nodes that granted it or failed, and on the nodes still
// working on it as soon as they answer, so that a lock that lands late is
// removed after it landed, not before. Nodes that refused need nothing.
// It runs in the background; a later Acquire by the same owner of the same
// key waits for it, so that a retry's grant is never undone by it.
func (b *Backend) abandon(key, owner string, acq *round) {
	t := b.pending.begin(key, owner, nil)
	ok := b.spawn(func() {
		defer b.pending.finish(t)
		var wg sync.WaitGroup
		release := func(i int) { wg.Go(func() { b.releaseNode(i, key, owner) }) }
		for i, s := range acq.state {
			if s == stateYes || s == stateFailed {
				release(i)
			}
		}
		acq.late(func(a answer) {
			if a.yes || a.err != nil {
				release(a.node)
			}
		})
		wg.Wait()
	})
	if !ok {
		b.pending.finish(t)
	}
}

// watchLate follows the answers that a successful acquisition did not
// wait for. A Release made meanwhile waits for a node's answer before it
// calls that node (releaseAfter), or, if its node timeout passes first,
// leaves the node to this task, which releases it once the grant is in.
func (b *Backend) watchLate(key, owner string, acq *round) {
	if acq.unread == 0 {
		return
	}
	late := make([]bool, len(acq.state))
	for i, s := range acq.state {
		late[i] = s == statePending || s == stateTimedOut
	}
	t := b.pending.begin(key, owner, late)
	ok := b.spawn(func() {
		defer b.pending.finish(t)
		acq.late(func(a answer) {
			if b.pending.answered(t, a.node) && (a.yes || a.err != nil) {
				b.releaseNode(a.node, key, owner)
			}
		})
	})
	if !ok {
		b.pending.finish(t)
	}
}

// releaseAfter releases key for owner on node i as part of a Release, but
// only after the node answered the acquisition that is still running
// there, if there is one: a release that overtook the grant would leave
// the grant in place for a whole TTL.
// n says when the node sends its release notice; tried reports that the
// node said someone else had tried to take the lock, or cannot say
// (driver.ReleaseNotice).
func (b *Backend) releaseAfter(ctx context.Context, t *task, i int, key, owner string, n driver.Notice) (a answer, tried bool) {
	if t != nil && !b.pending.isAnswered(t, i) {
		select {
		case <-t.answer[i]:
		case <-ctx.Done():
			if b.pending.handOff(t, i) {
				return answer{err: ctx.Err()}, false // the task releases it after the grant
			}
			b.releaseNode(i, key, owner) // answered just now: release it here
			return answer{err: ctx.Err()}, false
		}
	}
	ok, tried, err := driver.ReleaseNotice(ctx, b.nodes[i].b, key, owner, n)
	return answer{yes: ok && err == nil, err: err}, tried
}

// releaseNode releases key for owner on node i, bounded by the node
// timeout, for cleanups that nobody waits for.
func (b *Backend) releaseNode(i int, key, owner string) {
	ctx, stop := nodeContext(context.Background(), b.cfg.nodeTimeout)
	defer stop()
	_, _ = b.nodes[i].b.Release(ctx, key, owner)
}

// tracker records the background work of each key and owner.
type tracker struct {
	n  atomic.Int64 // entries in m, so that the common case takes no lock
	mu sync.Mutex
	m  map[string]*task
}

// task is one piece of background work: the cleanup of a failed
// acquisition, or the late answers of a successful one.
type task struct {
	id   string
	done chan struct{}
	// Late answers only: answer[i] is closed when node i answered the
	// acquisition (nil for nodes that had answered in time). Guarded by
	// tracker.mu: which late nodes answered, and which a Release left to
	// the task.
	answer              []chan struct{}
	answered, handedOff []bool
}

func taskID(key, owner string) string { return key + "\x00" + owner }

// begin records a task of key for owner. late is nil for a cleanup, and
// says which nodes have not answered for late answers.
func (tr *tracker) begin(key, owner string, late []bool) *task {
	t := &task{id: taskID(key, owner), done: make(chan struct{})}
	if late != nil {
		t.answer = make([]chan struct{}, len(late))
		t.answered = make([]bool, len(late))
		t.handedOff = make([]bool, len(late))
		for i, l := range late {
			if l {
				t.answer[i] = make(chan struct{})
			} else {
				t.answered[i] = true
			}
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.m == nil {
		tr.m = make(map[string]*task)
	}
	if tr.m[t.id] == nil {
		tr.n.Add(1)
	}
	tr.m[t.id] = t // a concurrent call of the same owner: the newest wins
	return t
}

// finish ends t.
func (tr *tracker) finish(t *task) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.m[t.id] == t {
		delete(tr.m, t.id)
		tr.n.Add(-1)
	}
	close(t.done)
}

// lookup returns the running task of key for owner that follows late
// answers, or nil.
func (tr *tracker) lookup(key, owner string) *task {
	if tr.n.Load() == 0 {
		return nil
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if t := tr.m[taskID(key, owner)]; t != nil && t.answer != nil {
		return t
	}
	return nil
}

// answered records that node i answered t's acquisition, and reports
// whether a Release handed that node over meanwhile.
func (tr *tracker) answered(t *task, i int) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t.answered[i] = true
	close(t.answer[i])
	return t.handedOff[i]
}

func (tr *tracker) isAnswered(t *task, i int) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return t.answered[i]
}

// handOff leaves the release of node i to t, unless the node answered
// meanwhile; it reports whether it did.
func (tr *tracker) handOff(t *task, i int) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if t.answered[i] {
		return false
	}
	t.handedOff[i] = true
	return true
}

// wait returns when no task of key for owner is running, or when ctx is
// done.
func (tr *tracker) wait(ctx context.Context, key, owner string) error {
	if tr.n.Load() == 0 {
		return nil
	}
	tr.mu.Lock()
	t := tr.m[taskID(key, owner)]
	tr.mu.Unlock()
	if t == nil {
		return nil
	}
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
