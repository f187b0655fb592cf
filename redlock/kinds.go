package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds of a Redlock are Redlocks of the nodes' own views of
// that kind, made with the same settings (driver.KindConfig): a reentrant
// or read-write lock is held when a quorum of the nodes' reentrant or
// read-write locks holds it, with the plain Redlock's timing, validity,
// cleanup and fencing. Each node must offer the kind
// (redis.Backend and memory.Backend do), and, unless WithoutFencing is
// given, raise the fence of its view (driver.Fencer), since the token is
// the largest of the granting quorum's and written back to a quorum, as
// the plain lock's is. A semaphore and a fair lock cannot be built from a
// quorum of nodes, and are refused (ErrSemaphore, ErrFair).
//
// A kind's view runs its own background work (late answers, cleanups):
// Close of the Backend closes every view made from it.

var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.Fairer      = (*Backend)(nil)
)

// ErrSemaphore is why a Redlock offers no semaphore: a quorum of per-node
// semaphores does not bound the number of holders. With 3 nodes (quorum
// 2) and 2 permits each, owner A takes permits on nodes {1, 2}, B on
// {2, 3} and C on {1, 3}: every node hands out exactly its 2 permits,
// every owner has a quorum, and 3 owners hold a semaphore of 2. Quorums
// intersect, but an intersection only excludes when each node admits one
// holder. It matches turnstile.ErrUnsupported.
var ErrSemaphore = fmt.Errorf("%w: redlock has no semaphore: a quorum of per-node semaphores does not bound the holders (3 nodes, 2 permits: holders on nodes {1,2}, {2,3} and {1,3} are 3)", turnstile.ErrUnsupported)

// ErrFair is why a Redlock offers no fair lock: each node would keep a
// queue of its own, and the nodes' queues need not agree on the order,
// so no quorum of them hands the lock to the first waiter. It matches
// turnstile.ErrUnsupported.
var ErrFair = fmt.Errorf("%w: redlock has no fair lock: every node keeps its own queue, and no quorum of queues has one order", turnstile.ErrUnsupported)

// ReentrantView implements driver.Reentranter: a Redlock of the nodes'
// reentrant views. An owner's re-entry counts on every node that grants
// it, and holds when a quorum does; each release counts down on every
// node. When a re-entry fails on the quorum, or its answer from a node
// is lost, the cleanup releases once on the nodes that may have counted
// it, so a node whose grant was lost may count the owner's hold one
// lower: the hold there then ends one release early, which the quorum
// covers as it covers a failed node.
//
// Every re-entry returns the token of the owner's first acquisition, as
// a reentrant lock must. The nodes keep each one's own first token, and
// the quorum of a re-entry need not be that of the first acquisition, so
// the view remembers, per key and owner, the token it returned first and
// how often the owner holds the key, until the last release or until the
// hold's TTL, counted from before the call that set it, has passed. The
// memory is the process's own: the same owner in two processes may see
// different tokens for one hold.
func (b *Backend) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	v, err := b.kindView("reentrant lock", func(n driver.Backend) (driver.Backend, error) {
		return turnstile.Reentrant(n) // the kind has no settings yet
	})
	if err != nil {
		return nil, err
	}
	return &reentrantView{Backend: v, held: map[holdID]*hold{}}, nil
}

// reentrantView is a Redlock of the nodes' reentrant locks that returns
// the first token on every re-entry.
type reentrantView struct {
	*Backend
	mu   sync.Mutex
	held map[holdID]*hold
}

type holdID struct{ key, owner string }

// hold is an owner's hold of a key: the first token, how often it holds
// it, and until when at least.
type hold struct {
	token   uint64
	count   int
	expires time.Time
}

// Acquire implements driver.Backend.
func (v *reentrantView) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	start := time.Now()
	tok, ok, err := v.Backend.Acquire(ctx, key, owner, ttl)
	if !ok || err != nil {
		return tok, ok, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	id := holdID{key, owner}
	if h := v.held[id]; h != nil && start.Before(h.expires) {
		h.count++
		h.expires = start.Add(ttl)
		return h.token, true, nil
	}
	v.held[id] = &hold{token: tok, count: 1, expires: start.Add(ttl)}
	return tok, true, nil
}

// Extend implements driver.Backend.
func (v *reentrantView) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	start := time.Now()
	ok, err := v.Backend.Extend(ctx, key, owner, ttl)
	if ok && err == nil {
		v.renewed(key, owner, start.Add(ttl))
	}
	return ok, err
}

// ExtendMany implements driver.BatchExtender.
func (v *reentrantView) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	start := time.Now()
	res := v.Backend.ExtendMany(ctx, reqs)
	for i, r := range res {
		if r.OK && r.Err == nil {
			v.renewed(reqs[i].Key, reqs[i].Owner, start.Add(reqs[i].TTL))
		}
	}
	return res
}

func (v *reentrantView) renewed(key, owner string, until time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if h := v.held[holdID{key, owner}]; h != nil && until.After(h.expires) {
		h.expires = until
	}
}

// Release implements driver.Backend.
func (v *reentrantView) Release(ctx context.Context, key, owner string) (bool, error) {
	ok, _, err := v.ReleaseNotice(ctx, key, owner, driver.NoticeIfTried)
	return ok, err
}

// ReleaseNotice implements driver.NoticeReleaser: the Redlock's, counted
// down in the view's memory as Release is. (Without it the embedded
// Backend's would answer, and the owner's next acquisition would be
// taken for a re-entry of a hold already ended, with its old token.)
func (v *reentrantView) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	ok, tried, err = v.Backend.ReleaseNotice(ctx, key, owner, n)
	v.mu.Lock()
	defer v.mu.Unlock()
	id := holdID{key, owner}
	if h := v.held[id]; h != nil {
		if h.count--; h.count <= 0 || !ok {
			delete(v.held, id)
		}
	}
	return ok, tried, err
}

// ForceRelease implements driver.ForceReleaser: the Redlock's, and the
// view forgets every owner's hold of key, so that no later acquisition
// returns a token from before the removal.
func (v *reentrantView) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	v.forget(key)
	st, err := v.Backend.ForceRelease(ctx, key)
	v.forget(key)
	return st, err
}

func (v *reentrantView) forget(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.held {
		if id.key == key {
			delete(v.held, id)
		}
	}
}

// ReadWriteView implements driver.ReadWriter: Redlocks of the nodes'
// read sides and of their write sides. It is safe by quorum
// intersection: a writer holds a quorum of nodes' write locks, and a
// reader or another writer a quorum of the nodes' read or write locks;
// any two quorums share a node, and no node grants a write lock together
// with a read or another write lock, so a writer never holds the lock
// with anyone else. Readers share: each node admits every reader. A
// waiting writer leaves its claim on every node it asks, so that nodes'
// writer preference keeps new readers from a quorum. The read side is
// driver.Shared. The nodes' claims last cfg.WriterClaim.
func (b *Backend) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	reads := make([]driver.Backend, len(b.nodes))
	writes := make([]driver.Backend, len(b.nodes))
	for i, n := range b.nodes {
		r, w, err := turnstile.ReadWrite(n.b, turnstile.WithWriterClaim(cfg.WriterClaim))
		if err != nil {
			return nil, nil, fmt.Errorf("redlock: read-write lock on %s: %w", n.name, err)
		}
		reads[i], writes[i] = r, w
	}
	rb, err := b.viewOf("read lock", reads)
	if err != nil {
		return nil, nil, err
	}
	wb, err := b.viewOf("write lock", writes)
	if err != nil {
		return nil, nil, err
	}
	return sharedView{rb}, wb, nil
}

// SemaphoreView implements driver.Semaphorer: it returns ErrSemaphore.
func (b *Backend) SemaphoreView(driver.KindConfig) (driver.Backend, error) {
	return nil, ErrSemaphore
}

// FairView implements driver.Fairer: it returns ErrFair.
func (b *Backend) FairView(driver.KindConfig) (driver.Backend, error) { return nil, ErrFair }

// kindView is a Redlock of every node's view that view returns.
func (b *Backend) kindView(kind string, view func(driver.Backend) (driver.Backend, error)) (*Backend, error) {
	views := make([]driver.Backend, len(b.nodes))
	for i, n := range b.nodes {
		v, err := view(n.b)
		if err != nil {
			return nil, fmt.Errorf("redlock: %s on %s: %w", kind, n.name, err)
		}
		views[i] = v
	}
	return b.viewOf(kind, views)
}

// viewOf is the Redlock of views, one per node in order, with b's
// settings; b closes it when it closes.
func (b *Backend) viewOf(kind string, views []driver.Backend) (*Backend, error) {
	cfg := b.cfg
	cfg.closeNodes = false // the nodes' views belong to the nodes
	v, err := newBackend(views, cfg)
	if err != nil {
		return nil, fmt.Errorf("redlock: %s: %w", kind, err)
	}
	// The views report no restart quarantine: their nodes' holds.
	v.maxTTL, v.now = b.maxTTL, b.now
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	b.views = append(b.views, v)
	return v, nil
}

// closeViews closes the views made from b, once b is closed.
func (b *Backend) closeViews() error {
	b.mu.Lock()
	views := b.views
	b.views = nil
	b.mu.Unlock()
	var errs []error
	for _, v := range views {
		errs = append(errs, v.Close())
	}
	return errors.Join(errs...)
}

// sharedView is the read side of a Redlock's read-write lock: readers
// hold a key together, so a Client's waiting readers contend on their
// own (driver.Shared).
type sharedView struct{ *Backend }

// Shared implements driver.Shared.
func (sharedView) Shared() bool { return true }
