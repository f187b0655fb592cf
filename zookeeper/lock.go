package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"
)

func (b *Backend) dir(key string) string { return b.root + "/" + escape(key) }

// enqueue creates owner's node at the end of key's queue. zxid is that of
// the creating transaction, which also touches the key's directory so
// that its Mzxid is returned: ZooKeeper's plain create does not return
// the new node's Stat.
func (b *Backend) enqueue(ctx context.Context, key, owner string) (string, int64, error) {
	return b.enqueueIn(ctx, b.dir(key), escape(owner)+"-", nil)
}

// enqueueIn creates an ephemeral sequential node named prefix plus its
// sequence in dir, with data, as enqueue does, and returns its path and
// the zxid of its creation.
func (b *Backend) enqueueIn(ctx context.Context, dir, prefix string, data []byte) (string, int64, error) {
	ops := []any{
		&zk.CreateRequest{Path: dir + "/" + prefix, Data: data, Acl: b.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: dir, Version: -1},
	}
	for attempt := 0; ; attempt++ {
		res, err := callUndo(ctx, func() ([]zk.MultiResponse, error) { return b.conn.Multi(ops...) }, func(res []zk.MultiResponse) {
			if len(res) > 0 && res[0].Error == nil && res[0].String != "" {
				b.cleanup(res[0].String) // created for a caller whose context ended
			}
		})
		if err == nil && len(res) == 2 && res[0].Error == nil && res[1].Error == nil && res[1].Stat != nil {
			if err := b.checkDir(ctx, dir, res[1].Stat.Czxid); err != nil {
				// The node must not stay in a directory others may
				// delete it from, nor one this Backend cannot vouch for.
				if rerr := b.remove(ctx, res[0].String); rerr != nil {
					b.cleanup(res[0].String)
				}
				return "", 0, err
			}
			return res[0].String, res[1].Stat.Mzxid, nil
		}
		if err == nil {
			err = multiErr(res, nil)
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt == 3 {
			return "", 0, fmt.Errorf("zookeeper: create lock node under %s: %w", dir, err)
		}
		// The key's directory does not exist yet, or ZooKeeper removed the
		// empty container just now.
		if err := b.mkdir(ctx, dir); err != nil {
			return "", 0, err
		}
	}
}

// multiErr is the error of a multi-op that was not applied as asked: the
// first error among its operations' results res, else err, else one
// saying the reply was unexpected.
func multiErr(res []zk.MultiResponse, err error) error {
	for _, r := range res {
		if r.Error != nil {
			return r.Error
		}
	}
	if err == nil {
		err = errors.New("unexpected reply to multi")
	}
	return err
}

// mkdir creates dir as a container node — ZooKeeper deletes containers
// once their last child is gone — and its parents as persistent nodes.
func (b *Backend) mkdir(ctx context.Context, dir string) error {
	_, err := call(ctx, func() (string, error) { return b.conn.CreateContainer(dir, nil, zk.FlagContainer, b.acl) })
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	if !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zookeeper: create %s: %w", dir, err)
	}
	var parents []string
	for p := path.Dir(dir); p != "/"; p = path.Dir(p) {
		parents = append([]string{p}, parents...)
	}
	for _, p := range parents {
		_, err := call(ctx, func() (string, error) { return b.conn.Create(p, nil, zk.FlagPersistent, b.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", p, err)
		}
		if err != nil && p == b.root {
			// Made by another client since Dial looked.
			if err := b.checkRoot(ctx); err != nil {
				return err
			}
		}
	}
	_, err = call(ctx, func() (string, error) { return b.conn.CreateContainer(dir, nil, zk.FlagContainer, b.acl) })
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zookeeper: create %s: %w", dir, err)
	}
	return nil
}

// list returns key's queue; an absent directory is an empty queue.
func (b *Backend) list(ctx context.Context, key string) ([]node, error) {
	return b.listDir(ctx, b.dir(key))
}

// listDir returns the queue in dir; an absent directory is an empty queue.
func (b *Backend) listDir(ctx context.Context, dir string) ([]node, error) {
	q, _, err := b.listStat(ctx, dir)
	return q, err
}

// listStat is listDir, with the directory's Stat (nil when it is absent).
func (b *Backend) listStat(ctx context.Context, dir string) ([]node, *zk.Stat, error) {
	type listing struct {
		children []string
		stat     *zk.Stat
	}
	l, err := call(ctx, func() (listing, error) {
		c, st, err := b.conn.Children(dir)
		return listing{c, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("zookeeper: list %s: %w", dir, err)
	}
	return queue(l.children), l.stat, nil
}

// unchanged reports whether no node came or went in a directory, whose
// Stat is st, since the transaction zxid created a node in it (its Pzxid
// is still zxid). If that node is first in line, every node ahead of it
// was gone before it came, so nobody was granted the lock since, and
// zxid is above every token issued before.
func unchanged(st *zk.Stat, zxid int64) bool { return st != nil && st.Pzxid == zxid }

// firstToken is the token of owner's node mine, created by the
// transaction zxid and found first in its queue, whose directory had
// Stat st then: zxid when the queue is unchanged since. Otherwise a
// waiter ahead of mine may have been granted the lock and let it go
// meanwhile, with a larger token: a write to mine now gives the token
// (its Mzxid).
func (b *Backend) firstToken(ctx context.Context, mine string, zxid int64, st *zk.Stat) (uint64, error) {
	if unchanged(st, zxid) {
		return uint64(zxid), nil
	}
	set, err := call(ctx, func() (*zk.Stat, error) { return b.conn.Set(mine, nil, -1) })
	if err != nil {
		return 0, fmt.Errorf("zookeeper: mark %s granted: %w", mine, err)
	}
	return uint64(set.Mzxid), nil
}

// remove deletes the node at p; a node already gone is no error. A delete
// that may not have reached the server dooms the node (reap.go).
func (b *Backend) remove(ctx context.Context, p string) error {
	err := b.deleteOrDoom(ctx, p, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zookeeper: delete %s: %w", p, err)
	}
	return nil
}

// Acquire implements driver.Backend. It never queues: it creates a node,
// keeps it if the node is first in the queue (or the owner's own node is),
// and deletes it otherwise. Two round trips, and a third to delete the
// node, or to write it when the queue changed between its creation and
// the look (see firstToken).
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	defer func() { err = b.permission(err, "take the lock in "+b.dir(key)) }()
	if err := b.live(); err != nil {
		return 0, false, err
	}
	if err := b.fitTTL(ttl); err != nil {
		return 0, false, err
	}
	mine, zxid, err := b.enqueue(ctx, key, owner)
	if err != nil {
		return 0, false, err
	}
	if b.beforeList != nil {
		b.beforeList()
	}
	q, st, err := b.listStat(ctx, b.dir(key))
	if err != nil {
		b.cleanup(mine)
		return 0, false, err
	}
	name, eo := path.Base(mine), escape(owner)
	switch {
	case len(q) > 0 && q[0].name == name:
		tok, err := b.firstToken(ctx, mine, zxid, st)
		if err != nil {
			b.cleanup(mine)
			return 0, false, err
		}
		b.arm(holdKey{key, owner}, mine, ttl)
		return tok, true, nil
	case len(q) > 0 && q[0].owner == eo:
		// Taken again by its holder (a retry after a lost reply): keep the
		// first node, whose place in the queue is the lock, and hand out
		// the new, larger zxid as the token.
		if err := b.remove(ctx, mine); err != nil {
			return 0, false, err
		}
		b.arm(holdKey{key, owner}, b.dir(key)+"/"+q[0].name, ttl)
		return uint64(zxid), true, nil
	default:
		if err := b.remove(ctx, mine); err != nil {
			return 0, false, err
		}
		return 0, false, nil
	}
}

// cleanup deletes a node whose acquisition failed, in the background so
// that a done context does not leave it behind.
func (b *Backend) cleanup(p string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		defer cancel()
		_ = b.remove(ctx, p)
	}()
}

// Extend implements driver.Backend. The lock lives as long as the session
// and the owner's node do; Extend checks that the owner's node is still
// first in the queue (one round trip) and restarts the TTL timer of a lock
// this Backend took. While the connection is suspended it fails with
// ErrSuspended; after the session expired it returns false.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	defer func() { err = b.permission(err, "read the lock in "+b.dir(key)) }()
	if err := b.live(); err != nil {
		return false, err
	}
	k := holdKey{key, owner}
	if lost, err := b.renewable(k, ttl); err != nil || lost {
		if lost {
			b.giveUp(ctx, k)
		}
		return false, err
	}
	h, expired := b.pause(k)
	if expired {
		return false, nil
	}
	q, err := b.list(ctx, key)
	held := err == nil && len(q) > 0 && q[0].owner == escape(owner)
	if h != nil {
		b.resume(k, h, ttl, held, err == nil && !held)
	}
	if err != nil {
		return false, err
	}
	return held, nil
}

// Release implements driver.Backend. A lock this Backend took is released
// by deleting its node (one round trip); otherwise Release deletes every
// node of owner in key's queue and reports whether one of them held the
// lock. When the server cannot be reached (ErrSuspended, or the
// connection dropped with the delete in flight) Release fails, and the
// Backend deletes the owner's node as soon as it has a session again, if
// the session lived on.
func (b *Backend) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	defer func() { err = b.permission(err, "release the lock in "+b.dir(key)) }()
	if err := b.live(); err != nil {
		if p, ok := b.take(holdKey{key, owner}); ok {
			b.doom(doomed{path: p}, nil)
		} else {
			b.doom(doomed{dir: b.dir(key), owner: escape(owner)}, nil)
		}
		return false, err
	}
	if p, ok := b.take(holdKey{key, owner}); ok {
		// A granted node stays first in its queue while it exists.
		return b.releaseNode(ctx, p, "delete")
	}
	q, err := b.list(ctx, key)
	if err != nil {
		if !final(err) {
			b.doom(doomed{dir: b.dir(key), owner: escape(owner)}, nil)
		}
		return false, err
	}
	b.drop(holdKey{key, owner})
	eo := escape(owner)
	held := false
	for i, n := range q {
		if n.owner != eo {
			continue
		}
		if err := b.remove(ctx, b.dir(key)+"/"+n.name); err != nil {
			return false, err
		}
		held = held || i == 0
	}
	return held, nil
}
