package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds as driver's kind interfaces, for turnstile.Reentrant,
// turnstile.Semaphore and turnstile.ReadWrite. The Backend is a
// driver.Queuer, so turnstile.Fair takes it as it is.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
)

// ReentrantView implements driver.Reentranter: b.Reentrant().
func (b *Backend) ReentrantView() (driver.Backend, error) { return b.Reentrant(), nil }

// SemaphoreView implements driver.Semaphorer: b.Semaphore(permits).
func (b *Backend) SemaphoreView(permits int) (driver.Backend, error) {
	return b.Semaphore(permits)
}

// ReadWriteView implements driver.ReadWriter: the two sides of
// b.ReadWrite().
func (b *Backend) ReadWriteView() (read, write driver.Backend, err error) {
	rw := b.ReadWrite()
	return rw.Read(), rw.Write(), nil
}

// kindDir is the directory of a lock kind's nodes for key: the plain
// lock's directory with "." and the kind appended. escape never writes a
// '.', so no plain lock's directory has such a name, and the plain
// lock's List passes these directories by.
func (b *Backend) kindDir(key, kind string) string { return b.dir(key) + "." + kind }

// kindHold names the hold of a lock kind in the Backend's TTL timers,
// apart from the plain lock's holds of the same key and owner.
func kindHold(kind, key, owner string) holdKey { return holdKey{kind + "\x00" + key, owner} }

// armAtLeast starts the TTL of a hold as arm does, but never shortens
// what an earlier grant of the same node left: each lease of a reentrant
// hold is renewed on its own schedule, and none may cut the others short.
func (b *Backend) armAtLeast(k holdKey, p string, ttl time.Duration) {
	b.mu.Lock()
	if h, ok := b.holds[k]; ok && h.path == p && !h.expiring && time.Until(h.deadline) > ttl {
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.arm(k, p, ttl)
}

// holdPath returns the node of a hold this Backend keeps, unless its TTL
// has passed.
func (b *Backend) holdPath(k holdKey) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.holds[k]
	if !ok || h.expiring {
		return "", false
	}
	return h.path, true
}

// seqKind is a lock kind kept, like the plain lock, as a queue of
// ephemeral sequential nodes in a directory of its own: the reentrant
// lock, and each side of the read-write lock. A node is named
// <tag><escaped owner>-<sequence>; the tag tells the sides of a
// read-write lock apart and, containing a '.', cannot be mistaken for
// part of an escaped owner.
type seqKind struct {
	b    *Backend
	kind string // the directory's suffix, and the namespace of the holds
	side string // what the holds of this side are called: "reentrant", "read", "write"
	tag  string // the prefix of this side's node names
	// blocker returns the index in q of the node that the node at index
	// at waits for, or -1 if that node holds the lock.
	blocker func(q []node, at int) int
	// counted: a holding owner's acquisitions are counted in its node's
	// data (the reentrant lock); otherwise a holding owner's new
	// acquisition is the same hold again (a retry after a lost reply).
	counted bool
	counts  *countCache // of counted kinds: the Backend's
}

// exclusive: a node holds the lock when it is first.
func exclusive(_ []node, at int) int { return at - 1 }

func (k *seqKind) names(key, owner string) (dir, me string, hk holdKey) {
	return k.b.kindDir(key, k.kind), k.tag + escape(owner), kindHold(k.side, key, owner)
}

// holding returns the index of me's node that holds the lock, or -1.
func (k *seqKind) holding(q []node, me string) int {
	for i, n := range q {
		if n.owner == me && k.blocker(q, i) < 0 {
			return i
		}
	}
	return -1
}

func indexOf(q []node, name string) int {
	for i, n := range q {
		if n.name == name {
			return i
		}
	}
	return -1
}

// count reads a reentrant hold's count from its node's data.
func count(data []byte) int {
	c, err := strconv.Atoi(string(data))
	if err != nil || c < 1 {
		return 1
	}
	return c
}

// countCache remembers, for the reentrant holds a view took or changed,
// the holder node's count, data version and creation zxid, so that a
// re-entry or a release is one versioned write. It is only a hint: a
// write that meets another version (an acquisition or release through
// another Backend) reads the node again.
//
// It also counts the acquisitions each hold has through this Backend and
// not yet released: when the last of them is released while the owner
// still holds the lock through another Backend, this Backend's TTL
// timer stops, so that it does not end a hold that others renew.
type countCache struct {
	mu    sync.Mutex
	m     map[holdKey]nodeCount
	local map[holdKey]int
}

// reentrantCounts returns the Backend's countCache.
func (b *Backend) reentrantCounts() *countCache {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.counts == nil {
		b.counts = &countCache{m: make(map[holdKey]nodeCount), local: make(map[holdKey]int)}
	}
	return b.counts
}

// took counts an acquisition through this Backend.
func (c *countCache) took(hk holdKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.local[hk]++
}

// gave counts a release through this Backend and reports whether the
// Backend's acquisitions of the hold are all released.
func (c *countCache) gave(hk holdKey) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.local[hk]
	if !ok {
		return false // none through this Backend
	}
	if n <= 1 {
		delete(c.local, hk)
		return true
	}
	c.local[hk] = n - 1
	return false
}

// nodeCount is what a reentrant hold's node says.
type nodeCount struct {
	path    string
	czxid   int64
	version int32
	n       int
}

func (c *countCache) get(hk holdKey, p string) (nodeCount, bool) {
	if c == nil {
		return nodeCount{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nc, ok := c.m[hk]
	return nc, ok && nc.path == p
}

func (c *countCache) put(hk holdKey, nc nodeCount) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[hk] = nc
}

// forget drops what the cache knows of a hold that ended.
func (c *countCache) forget(hk holdKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, hk)
	delete(c.local, hk)
}

// read returns what the node at p says.
func (k *seqKind) read(ctx context.Context, p string) (nodeCount, error) {
	return call(ctx, func() (nodeCount, error) {
		d, st, err := k.b.conn.Get(p)
		if err != nil {
			return nodeCount{}, err
		}
		return nodeCount{path: p, czxid: st.Czxid, version: st.Version, n: count(d)}, nil
	})
}

// again takes the hold of the node at p once more for its owner: counted
// kinds add one to its count (a versioned write, repeated if another
// acquisition or release wrote in between). The token is the node's
// creation zxid, that of the first acquisition. ok is false if the node
// is gone.
func (k *seqKind) again(ctx context.Context, hk holdKey, p string, ttl time.Duration) (_ uint64, ok bool, _ error) {
	nc, known := k.counts.get(hk, p)
	for {
		if !known {
			var err error
			nc, err = k.read(ctx, p)
			if errors.Is(err, zk.ErrNoNode) {
				k.counts.forget(hk)
				return 0, false, nil
			}
			if err != nil {
				return 0, false, fmt.Errorf("zookeeper: read %s: %w", p, err)
			}
		}
		known = false
		if k.counted {
			next := []byte(strconv.Itoa(nc.n + 1))
			st, err := call(ctx, func() (*zk.Stat, error) { return k.b.conn.Set(p, next, nc.version) })
			switch {
			case errors.Is(err, zk.ErrBadVersion):
				continue
			case errors.Is(err, zk.ErrNoNode):
				k.counts.forget(hk)
				return 0, false, nil
			case err != nil:
				return 0, false, fmt.Errorf("zookeeper: count %s: %w", p, err)
			}
			k.counts.put(hk, nodeCount{path: p, czxid: nc.czxid, version: st.Version, n: nc.n + 1})
			k.counts.took(hk)
		}
		k.b.armAtLeast(hk, p, ttl)
		return uint64(nc.czxid), true, nil
	}
}

// granted starts the TTL of a hold just granted through a new node.
func (k *seqKind) granted(hk holdKey, p string, zxid int64, ttl time.Duration) {
	if k.counted {
		k.counts.forget(hk)
		k.counts.put(hk, nodeCount{path: p, czxid: zxid, n: 1})
		k.counts.took(hk)
	}
	k.b.arm(hk, p, ttl)
}

// Acquire never queues. A re-entry of a hold this Backend took counts
// one more acquisition on its node (two round trips). Otherwise Acquire
// creates a node and keeps it if the node holds the lock (two round
// trips), or deletes it and, if owner holds the lock through an earlier
// node, takes that hold again.
func (k *seqKind) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	dir, me, hk := k.names(key, owner)
	defer func() { err = k.b.permission(err, "take the "+k.side+" lock in "+dir) }()
	if err := k.b.live(); err != nil {
		return 0, false, err
	}
	if err := k.b.fitTTL(ttl); err != nil {
		return 0, false, err
	}
	if p, ok := k.b.holdPath(hk); ok && k.counted {
		// A re-entry of a hold this Backend took: no new node.
		if tok, ok, err := k.again(ctx, hk, p, ttl); ok || err != nil {
			return tok, ok, err
		}
	}
	mine, zxid, err := k.b.enqueueIn(ctx, dir, me+"-", k.initial())
	if err != nil {
		return 0, false, err
	}
	q, err := k.b.listDir(ctx, dir)
	if err != nil {
		k.b.cleanup(mine)
		return 0, false, err
	}
	if at := indexOf(q, path.Base(mine)); at >= 0 && k.blocker(q, at) < 0 {
		k.granted(hk, mine, zxid, ttl)
		return uint64(zxid), true, nil
	}
	if err := k.b.remove(ctx, mine); err != nil {
		return 0, false, err
	}
	if i := k.holding(q, me); i >= 0 {
		// The owner holds the lock through an earlier node.
		return k.again(ctx, hk, dir+"/"+q[i].name, ttl)
	}
	return 0, false, nil
}

// initial is the data of a new node: a reentrant hold's count.
func (k *seqKind) initial() []byte {
	if k.counted {
		return []byte("1")
	}
	return nil
}

// AcquireWait implements driver.Queuer: the owner's node joins the end of
// the queue (or, if owner holds the lock through an earlier node, leaves
// it again and takes that hold again) and waits, watching only the node blocker names, until it
// holds the lock. The token is the node's creation zxid: every node ahead
// of it, whose holders had smaller tokens, is gone or shares the lock
// with it. When ctx is done the node leaves the queue.
func (k *seqKind) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	dir, me, hk := k.names(key, owner)
	defer func() { err = k.b.permission(err, "queue for the "+k.side+" lock in "+dir) }()
	if err := k.b.live(); err != nil {
		return 0, err
	}
	if err := k.b.fitTTL(ttl); err != nil {
		return 0, err
	}
	if p, ok := k.b.holdPath(hk); ok && k.counted {
		if tok, ok, err := k.again(ctx, hk, p, ttl); ok || err != nil {
			return tok, err
		}
	}
	mine, zxid, err := k.b.enqueueIn(ctx, dir, me+"-", k.initial())
	if err != nil {
		return 0, err
	}
	name := path.Base(mine)
	report, last := driver.PositionFunc(ctx), 0
	for {
		q, err := k.b.listDir(ctx, dir)
		if err != nil {
			k.b.cleanup(mine)
			return 0, err
		}
		at := indexOf(q, name)
		if at < 0 {
			return 0, fmt.Errorf("%w: %s", ErrNodeVanished, mine)
		}
		j := k.blocker(q, at)
		if j < 0 {
			k.granted(hk, mine, zxid, ttl)
			return uint64(zxid), nil
		}
		if i := k.holding(q, me); i >= 0 {
			// The owner holds the lock through an earlier node.
			if err := k.b.remove(ctx, mine); err != nil {
				return 0, err
			}
			tok, ok, err := k.again(ctx, hk, dir+"/"+q[i].name, ttl)
			if err == nil && !ok {
				err = fmt.Errorf("%w: %s", ErrNodeVanished, dir+"/"+q[i].name)
			}
			return tok, err
		}
		pred := dir + "/" + q[j].name
		watch := func() (<-chan zk.Event, error) {
			_, _, ch, err := k.b.conn.GetW(pred)
			return ch, err
		}
		if report != nil {
			// As the plain lock's waiters do: one that counts its place
			// watches the whole line.
			if at != last {
				report(at)
				last = at
			}
			watch = func() (<-chan zk.Event, error) {
				kids, _, ch, err := k.b.conn.ChildrenW(dir)
				if err == nil && !sameNodes(queue(kids), q) {
					return nil, zk.ErrNoNode
				}
				return ch, err
			}
		}
		ch, err := call(ctx, watch)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			k.b.cleanup(mine)
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("zookeeper: watch %s: %w", pred, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			k.b.cleanup(mine)
			return 0, ctx.Err()
		}
	}
}

// Extend checks that owner's node still holds the lock (one round trip)
// and restarts the TTL timer of a hold this Backend took.
func (k *seqKind) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	dir, me, hk := k.names(key, owner)
	defer func() { err = k.b.permission(err, "read the "+k.side+" lock in "+dir) }()
	if err := k.b.live(); err != nil {
		return false, err
	}
	if lost, err := k.b.renewable(hk, ttl); err != nil || lost {
		if lost {
			// The whole hold goes: every acquisition of it trusts the
			// session alike.
			k.b.giveUp(ctx, hk)
			k.counts.forget(hk)
		}
		return false, err
	}
	h, expired := k.b.pause(hk)
	if expired {
		return false, nil
	}
	q, err := k.b.listDir(ctx, dir)
	held := err == nil && k.holding(q, me) >= 0
	if h != nil {
		k.b.resume(hk, h, ttl, held, err == nil && !held)
	}
	if err != nil {
		return false, err
	}
	return held, nil
}

// Release gives back one acquisition: a counted hold's count goes down by
// one, and the node is deleted with the last; otherwise the node is
// deleted. It reports whether owner held the lock.
func (k *seqKind) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	dir, me, hk := k.names(key, owner)
	defer func() { err = k.b.permission(err, "release the "+k.side+" lock in "+dir) }()
	if err := k.b.live(); err != nil {
		return false, err
	}
	p, ok := k.b.holdPath(hk)
	if !ok {
		q, err := k.b.listDir(ctx, dir)
		if err != nil {
			return false, err
		}
		i := k.holding(q, me)
		for j, n := range q {
			if n.owner == me && j != i {
				// A node left behind by an acquisition whose reply was
				// lost.
				if err := k.b.remove(ctx, dir+"/"+n.name); err != nil {
					return false, err
				}
			}
		}
		if i < 0 {
			k.b.drop(hk)
			return false, nil
		}
		p = dir + "/" + q[i].name
	}
	if !k.counted {
		err := k.b.deleteOrDoom(ctx, p, -1)
		k.b.drop(hk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		default:
			return false, fmt.Errorf("zookeeper: release %s: %w", p, err)
		}
	}
	nc, known := k.counts.get(hk, p)
	for {
		if !known {
			nc, err = k.read(ctx, p)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return false, fmt.Errorf("zookeeper: read %s: %w", p, err)
			}
		}
		known = false
		if err == nil && nc.n > 1 {
			var st *zk.Stat
			st, err = call(ctx, func() (*zk.Stat, error) { return k.b.conn.Set(p, []byte(strconv.Itoa(nc.n-1)), nc.version) })
			if err == nil {
				k.counts.put(hk, nodeCount{path: p, czxid: nc.czxid, version: st.Version, n: nc.n - 1})
				if k.counts.gave(hk) {
					k.b.drop(hk) // the acquisitions left are another Backend's
				}
			}
		} else if err == nil {
			_, err = call(ctx, func() (struct{}, error) { return struct{}{}, k.b.conn.Delete(p, nc.version) })
			if err == nil {
				k.counts.forget(hk)
				k.b.drop(hk)
			}
		}
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue
		case errors.Is(err, zk.ErrNoNode):
			k.counts.forget(hk)
			k.b.drop(hk)
			return false, nil
		case err != nil:
			return false, fmt.Errorf("zookeeper: release %s: %w", p, err)
		}
		return true, nil
	}
}
