package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"
)

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
