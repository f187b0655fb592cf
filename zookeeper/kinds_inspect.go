package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile/driver"
)

// The operator calls on the kinds' views: each reads or clears the
// kind's own directory of a key, as the plain lock's do its queue.
var (
	_ driver.Inspector     = (*Reentrant)(nil)
	_ driver.ForceReleaser = (*Reentrant)(nil)
	_ driver.Inspector     = (*ReadLock)(nil)
	_ driver.ForceReleaser = (*ReadLock)(nil)
	_ driver.Inspector     = (*WriteLock)(nil)
	_ driver.ForceReleaser = (*WriteLock)(nil)
	_ driver.Inspector     = (*Semaphore)(nil)
	_ driver.ForceReleaser = (*Semaphore)(nil)
)

// member is one node of a kind's directory.
type member struct {
	name  string // the node's name
	owner string // the owner id, unescaped
	side  string // the side whose holds it is kept under: reentrant, read, write, semaphore
}

// members sorts the children of a kind's directory into holders and
// others (nodes that wait, or an acquisition's leftovers), and counts
// the waiters among the others: -1 for a kind without a queue.
type members func(names []string) (held, others []member, waiters int)

// seqMembers reads a queue of sequential nodes: a node holds the lock
// when the blocker of its side names none ahead of it. Nodes of a
// holder's owner behind it are not waiters but its own leftovers.
func seqMembers(names []string) (held, others []member, waiters int) {
	q := queue(names)
	holders := map[string]bool{}
	for i, n := range q {
		side, blocker, eo := "reentrant", exclusive, n.owner
		if o, ok := strings.CutPrefix(n.owner, readTag); ok {
			side, blocker, eo = "read", afterWriters, o
		} else if o, ok := strings.CutPrefix(n.owner, writeTag); ok {
			side, eo = "write", o
		}
		owner, ok := unescape(eo)
		if !ok {
			owner = eo // not written by this package: shown as it is
		}
		m := member{name: n.name, owner: owner, side: side}
		if blocker(q, i) < 0 {
			held = append(held, m)
			holders[n.owner] = true
			continue
		}
		others = append(others, m)
		if !holders[n.owner] {
			waiters++
		}
	}
	return held, others, waiters
}

// leaseMembers reads a semaphore's leases: each is a holder, and the
// store keeps no queue.
func leaseMembers(names []string) (held, others []member, waiters int) {
	for _, n := range names {
		ls, ok := parseLease(n)
		if !ok {
			continue
		}
		owner, ok := unescape(ls.owner)
		if !ok {
			owner = ls.owner
		}
		held = append(held, member{name: n, owner: owner, side: "semaphore"})
	}
	sort.Slice(held, func(i, j int) bool { return held[i].name < held[j].name })
	return held, nil, -1
}

// inspectKind reads key's directory of kind: one listing, then the stat
// of each holder's node for its token. Holders' TTL is -1, as the plain
// lock's: a hold lives as long as its node and session. Token is the
// largest of the directory's Mzxid — written with every new node — and
// the holders' tokens. It returns the holders' nodes, and the others of
// their owners, for ForceRelease; errRaced if a holder's node went away
// between the reads.
func (b *Backend) inspectKind(ctx context.Context, key, kind string, by members) (driver.LockState, []member, error) {
	st := driver.LockState{Key: key}
	dir := b.kindDir(key, kind)
	l, err := b.children(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		_, _, w := by(nil)
		st.Waiters = max(w, -1)
		return st, nil, nil
	}
	if err != nil {
		return driver.LockState{}, nil, fmt.Errorf("zookeeper: list %s: %w", dir, err)
	}
	st.Token = uint64(max(l.stat.Mzxid, 0))
	held, others, waiters := by(l.names)
	st.Waiters = waiters
	owners := map[string]bool{}
	for _, m := range held {
		p := dir + "/" + m.name
		ns, err := b.stat(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return driver.LockState{}, nil, errRaced
		}
		if err != nil {
			return driver.LockState{}, nil, fmt.Errorf("zookeeper: stat %s: %w", p, err)
		}
		tok := uint64(max(ns.Czxid, 0))
		st.Holders = append(st.Holders, driver.Holder{Owner: m.owner, Token: tok, TTL: -1})
		st.Token = max(st.Token, tok)
		owners[m.side+"\x00"+m.owner] = true
	}
	st.Held = len(held) > 0
	nodes := held
	for _, m := range others {
		if owners[m.side+"\x00"+m.owner] {
			nodes = append(nodes, m)
		}
	}
	return st, nodes, nil
}

// inspectKindRetry is inspectKind, read again while the holders change
// under it.
func (b *Backend) inspectKindRetry(ctx context.Context, key, kind string, by members) (_ driver.LockState, err error) {
	defer func() { err = b.permission(err, "read the locks in "+b.kindDir(key, kind)) }()
	if err := b.live(); err != nil {
		return driver.LockState{}, err
	}
	for attempt := 0; ; attempt++ {
		st, _, err := b.inspectKind(ctx, key, kind, by)
		if errors.Is(err, errRaced) && attempt < 10 {
			continue
		}
		return st, err
	}
}

// listKind is List over the directories of kind.
func (b *Backend) listKind(ctx context.Context, kind, prefix string, limit int, by members) ([]driver.LockState, bool, error) {
	return b.listDirs(ctx, prefix, limit,
		func(n string) (string, bool) { return strings.CutSuffix(n, "."+kind) },
		func(ctx context.Context, k string) (driver.LockState, error) {
			return b.inspectKindRetry(ctx, k, kind, by)
		})
}

// forceReleaseKind deletes the holders' nodes of key's directory of kind
// (and their owners' other nodes, so that none takes its place) and
// writes the directory, in one multi-op; the returned Token is its zxid,
// larger than every token issued before. The holders' next Extend
// reports the hold lost.
func (b *Backend) forceReleaseKind(ctx context.Context, key, kind string, by members) (_ driver.LockState, err error) {
	dir := b.kindDir(key, kind)
	defer func() { err = b.permission(err, "remove the locks in "+dir) }()
	if err := b.live(); err != nil {
		return driver.LockState{}, err
	}
	for attempt := 0; ; attempt++ {
		st, nodes, err := b.inspectKind(ctx, key, kind, by)
		if err == nil && len(nodes) > 0 {
			paths := make([]string, len(nodes))
			for i, m := range nodes {
				paths[i] = dir + "/" + m.name
			}
			st.Token, err = b.forceDelete(ctx, dir, paths)
		}
		if errors.Is(err, errRaced) && attempt < 10 {
			continue
		}
		if err != nil {
			return driver.LockState{}, err
		}
		// This Backend's timers and counts of the holds go with them: a
		// count left behind would keep a later hold's timer running
		// after the last release through this Backend.
		counts := b.reentrantCounts()
		for _, m := range nodes {
			hk := kindHold(m.side, key, m.owner)
			b.drop(hk)
			counts.forget(hk)
		}
		return st, nil
	}
}

// Inspect implements driver.Inspector for the reentrant lock and both
// sides of the read-write lock: the holders of key's lock in the kind —
// the reentrant holder, with the token of its first acquisition, or the
// readers or the writer — and the waiters, of both sides of a read-write
// lock.
func (k *seqKind) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return k.b.inspectKindRetry(ctx, key, k.kind, seqMembers)
}

// List implements driver.Inspector over the locks of the kind.
func (k *seqKind) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return k.b.listKind(ctx, k.kind, prefix, limit, seqMembers)
}

// ForceRelease implements driver.ForceReleaser: it ends every hold of
// key's lock in the kind, a reentrant hold whatever its count, readers'
// and writer's alike.
func (k *seqKind) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return k.b.forceReleaseKind(ctx, key, k.kind, seqMembers)
}

// Inspect implements driver.Inspector: the holders of key's permits, each
// with its lease's token. Waiters is -1: semaphore waiters retry rather
// than queue in ZooKeeper.
func (s *Semaphore) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return s.b.inspectKindRetry(ctx, key, "semaphore", leaseMembers)
}

// List implements driver.Inspector over the semaphores.
func (s *Semaphore) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return s.b.listKind(ctx, "semaphore", prefix, limit, leaseMembers)
}

// ForceRelease implements driver.ForceReleaser: it takes back every
// permit of key.
func (s *Semaphore) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return s.b.forceReleaseKind(ctx, key, "semaphore", leaseMembers)
}
