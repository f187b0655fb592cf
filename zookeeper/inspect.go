package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

// listBatch is how many key directories List reads at once: their
// requests are pipelined on the session's one connection.
const listBatch = 32

// errRaced means the queue changed between two reads; the caller reads
// again.
var errRaced = errors.New("zookeeper: queue changed while it was read")

// Inspect implements driver.Inspector with two reads: the children of
// key's directory (its queue) and the stat of the first node (the
// holder). Holders' TTL is -1: a lock lives as long as its node and the
// session that created it; the TTL the holder asked for is kept by its
// own Backend, not in ZooKeeper. Waiters counts the queued nodes of other
// owners behind the holder. Token is the largest of the holder node's
// zxid and the zxid of the key's last queue entry, at least the holder's
// token; a free key whose directory ZooKeeper has removed reports 0.
func (b *Backend) Inspect(ctx context.Context, key string) (_ driver.LockState, err error) {
	defer func() { err = b.permission(err, "read the lock in "+b.dir(key)) }()
	if err := b.live(); err != nil {
		return driver.LockState{}, err
	}
	for attempt := 0; ; attempt++ {
		st, _, err := b.inspect(ctx, key)
		if errors.Is(err, errRaced) && attempt < 10 {
			continue
		}
		return st, err
	}
}

// inspect reads key's state and returns it with the holder node's path
// ("" when free), or errRaced when the holder's node went away between
// the two reads.
func (b *Backend) inspect(ctx context.Context, key string) (driver.LockState, []string, error) {
	st := driver.LockState{Key: key}
	dir := b.dir(key)
	l, err := b.children(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		return st, nil, nil
	}
	if err != nil {
		return driver.LockState{}, nil, fmt.Errorf("zookeeper: list %s: %w", dir, err)
	}
	st.Token = uint64(max(l.stat.Mzxid, 0))
	q := queue(l.names)
	if len(q) == 0 {
		return st, nil, nil
	}
	first := dir + "/" + q[0].name
	ns, err := b.stat(ctx, first)
	if errors.Is(err, zk.ErrNoNode) {
		return driver.LockState{}, nil, errRaced
	}
	if err != nil {
		return driver.LockState{}, nil, fmt.Errorf("zookeeper: stat %s: %w", first, err)
	}
	owner, ok := unescape(q[0].owner)
	if !ok {
		owner = q[0].owner // not written by this package: shown as it is
	}
	tok := uint64(max(ns.Mzxid, 0))
	st.Held = true
	st.Holders = []driver.Holder{{Owner: owner, Token: tok, TTL: -1}}
	st.Token = max(st.Token, tok)
	paths := []string{first}
	for _, n := range q[1:] {
		if n.owner == q[0].owner {
			paths = append(paths, dir+"/"+n.name) // the holder's own retries
		} else {
			st.Waiters++
		}
	}
	return st, paths, nil
}

// List implements driver.Inspector. ZooKeeper has no range reads: List
// reads the names of every key directory under the root (one request,
// whose reply grows with the number of keys that have a directory — held,
// queued, or freed within the last minute or so before ZooKeeper removes
// the empty container), keeps those that start with prefix, and inspects
// them in key order, listBatch at a time, until it has found limit held
// locks and one more. So its cost is one listing of all keys plus two
// reads per key under prefix it looks at.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return b.listDirs(ctx, prefix, limit, func(n string) (string, bool) { return n, true }, b.Inspect)
}

// listDirs lists the held locks whose directories are children of the
// root: dirOf says whether a child's name is a directory of the kind
// listed and gives its escaped key, inspect reads one key's state. It
// reads the names once, keeps the keys that start with prefix, and
// inspects them in key order, listBatch at a time, until it has found
// limit held keys and one more.
func (b *Backend) listDirs(ctx context.Context, prefix string, limit int, dirOf func(name string) (string, bool), inspect func(context.Context, string) (driver.LockState, error)) (_ []driver.LockState, _ bool, err error) {
	defer func() { err = b.permission(err, "list the locks under "+b.root) }()
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: zookeeper: list limit %d must be positive", turnstile.ErrInvalidOption, limit)
	}
	if err := b.live(); err != nil {
		return nil, false, err
	}
	names, err := call(ctx, func() ([]string, error) {
		c, _, err := b.conn.Children(b.root)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("zookeeper: list %s: %w", b.root, err)
	}
	ep := escape(prefix)
	var keys []string
	for _, n := range names {
		base, ok := dirOf(n)
		if !ok || !strings.HasPrefix(base, ep) {
			continue
		}
		if k, ok := unescape(base); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)

	var out []driver.LockState
	for lo := 0; lo < len(keys) && len(out) <= limit; lo += listBatch {
		batch := keys[lo:min(lo+listBatch, len(keys))]
		states := make([]driver.LockState, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, k := range batch {
			wg.Go(func() { states[i], errs[i] = inspect(ctx, k) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, false, err
		}
		for _, st := range states {
			if st.Held {
				out = append(out, st)
			}
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// ForceRelease implements driver.ForceReleaser. It reads key's queue and
// then, in one multi-op, deletes the holder's node (and any other node of
// the same owner, so that none of them takes its place) and writes to
// key's directory. A node deleted is what a release does, so the waiter
// watching it is woken alike, and the holder's next Extend finds it is no
// longer first and reports the lock lost. If the queue changed between
// the read and the multi-op, it reads again.
//
// The token floor needs no extra write: tokens are zxids, which grow with
// every write to the ensemble. The returned Token is the zxid of the
// multi-op, larger than every token issued before it and smaller than
// every later one.
func (b *Backend) ForceRelease(ctx context.Context, key string) (_ driver.LockState, err error) {
	defer func() { err = b.permission(err, "remove the lock in "+b.dir(key)) }()
	if err := b.live(); err != nil {
		return driver.LockState{}, err
	}
	for attempt := 0; ; attempt++ {
		st, paths, err := b.inspect(ctx, key)
		if err == nil && len(paths) > 0 {
			st.Token, err = b.forceDelete(ctx, b.dir(key), paths)
		}
		if errors.Is(err, errRaced) && attempt < 10 {
			continue
		}
		if err != nil {
			return driver.LockState{}, err
		}
		if st.Held {
			b.drop(holdKey{key, st.Holders[0].Owner})
		}
		return st, nil
	}
}

// forceDelete deletes paths and writes dir, their directory, in one
// multi-op, returning the multi-op's zxid, or errRaced if a node was gone
// already.
func (b *Backend) forceDelete(ctx context.Context, dir string, paths []string) (uint64, error) {
	ops := make([]any, 0, len(paths)+1)
	for _, p := range paths {
		ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
	}
	ops = append(ops, &zk.SetDataRequest{Path: dir, Version: -1})
	res, err := call(ctx, func() ([]zk.MultiResponse, error) { return b.conn.Multi(ops...) })
	if err == nil && len(res) == len(ops) && res[len(ops)-1].Stat != nil {
		return uint64(max(res[len(ops)-1].Stat.Mzxid, 0)), nil
	}
	err = multiErr(res, err)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, errRaced
	}
	return 0, fmt.Errorf("zookeeper: force release %s: %w", dir, err)
}

// unescape reverses escape: it decodes %XX and reports whether s is a
// name escape produced (every other byte in [A-Za-z0-9_:-], hex digits
// upper-case).
func unescape(s string) (string, bool) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case plain(c):
			b.WriteByte(c)
		case c == '%' && i+2 < len(s):
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 || plain(hi<<4|lo) {
				return "", false // not hex, or a byte escape leaves as it is
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

// plain reports whether escape leaves c as it is.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == ':' || c == '-'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
