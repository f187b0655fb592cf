package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds, for turnstile.Reentrant, turnstile.Semaphore and
// turnstile.ReadWrite, which check their settings and hand them here. The
// Backend is a driver.Queuer, so turnstile.Fair takes it as it is.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
)

// ReentrantView implements driver.Reentranter: a *Reentrant.
func (b *Backend) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	return &Reentrant{seqKind{b: b, kind: "reentrant", side: "reentrant", blocker: exclusive, counted: true, counts: b.reentrantCounts()}}, nil
}

// SemaphoreView implements driver.Semaphorer: a *Semaphore of
// cfg.Permits permits.
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return &Semaphore{b: b, permits: cfg.Permits}, nil
}

// ReadWriteView implements driver.ReadWriter: a *ReadLock and a
// *WriteLock. Waiting writers queue in order and need no claim:
// cfg.WriterClaim has no effect.
func (b *Backend) ReadWriteView(driver.KindConfig) (read, write driver.Backend, err error) {
	return &ReadLock{seqKind{b: b, kind: "rw", side: "read", tag: readTag, blocker: afterWriters}},
		&WriteLock{seqKind{b: b, kind: "rw", side: "write", tag: writeTag, blocker: exclusive}}, nil
}

// kindDir is the directory of a lock kind's nodes for key: the plain
// lock's directory with "." and the kind appended. escape never writes a
// '.', so no plain lock's directory has such a name, and the plain
// lock's List passes these directories by.
func (b *Backend) kindDir(key, kind string) string { return b.dir(key) + "." + kind }

// kindHold names the hold of a lock kind in the Backend's TTL timers,
// apart from the plain lock's holds of the same key and owner.
func kindHold(kind, key, owner string) holdKey { return holdKey{kind + "\x00" + key, owner} }

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
		// As the plain lock's waiters do: behind the node that blocks it.
		if err := k.b.waitBehind(ctx, mine, dir, dir+"/"+q[j].name, q, at, &last, report); err != nil {
			return 0, err
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
		held, err := k.b.releaseNode(ctx, p, "release")
		k.b.drop(hk)
		return held, err
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
