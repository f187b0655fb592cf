package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The operator calls on the kinds' views (turnstile status, ls, unlock
// --force): each reads or clears the kind's directory of a key,
// <prefix><kind>/<escaped key>/, as the plain lock's read or clear its
// lock key. Without them an operator would see a held permit as a free
// key.
var (
	_ driver.Inspector     = (*Semaphore)(nil)
	_ driver.ForceReleaser = (*Semaphore)(nil)
	_ driver.Inspector     = (*ReadLock)(nil)
	_ driver.ForceReleaser = (*ReadLock)(nil)
	_ driver.Inspector     = (*WriteLock)(nil)
	_ driver.ForceReleaser = (*WriteLock)(nil)
	_ driver.Inspector     = (*Reentrant)(nil)
	_ driver.ForceReleaser = (*Reentrant)(nil)
)

// listPage is how many keys a List of a kind reads per round trip.
const listPage = 500

// kindLayout says where a kind keeps a key's holders in its directory.
type kindLayout struct {
	kind string // the directory's kind: semaphore, rw, reentrant
	// holders are the holders' keys relative to the directory: a key
	// whose value is the owner, or a directory (ending in "/") of keys
	// named after their owners.
	holders []string
	// extra are keys deleted with the holders (the reentrant count).
	extra []string
	// created: a holder's token is its key's create revision, which the
	// reentrant lock keeps across re-entries and moves to longer leases;
	// else its mod revision, as the plain lock's Inspect reports.
	created bool
}

var (
	semaphoreLayout = kindLayout{kind: "semaphore", holders: []string{"holders/"}}
	rwLayout        = kindLayout{kind: "rw", holders: []string{"writer", "readers/"}}
	reentrantLayout = kindLayout{kind: "reentrant", holders: []string{"holder"}, extra: []string{"count"}, created: true}
)

// holdKV is a holder's key as read, for its lease's time left.
type holdKV struct {
	owner string
	kv    *mvccpb.KeyValue
}

// holder returns the holder that kv is, relative path rel in the
// directory, if it is one.
func (l kindLayout) holder(rel string, kv *mvccpb.KeyValue) (holdKV, bool) {
	for _, h := range l.holders {
		if !strings.HasSuffix(h, "/") {
			if rel == h {
				return holdKV{string(kv.Value), kv}, true
			}
			continue
		}
		if name, ok := strings.CutPrefix(rel, h); ok && name != "" {
			owner, err := url.PathUnescape(name)
			if err != nil {
				owner = name // not written by this package: shown as it is
			}
			return holdKV{owner, kv}, true
		}
	}
	return holdKV{}, false
}

// token is a holder's fencing token, as l keeps it.
func (l kindLayout) token(kv *mvccpb.KeyValue) uint64 {
	if l.created {
		return uint64(kv.CreateRevision)
	}
	return uint64(kv.ModRevision)
}

// read sorts the keys of a key's directory dir into holders and waiters.
func (l kindLayout) read(dir string, kvs []*mvccpb.KeyValue) (hs []holdKV, waiters int) {
	for _, kv := range kvs {
		rel := strings.TrimPrefix(string(kv.Key), dir)
		if strings.HasPrefix(rel, "queue/") {
			waiters++
			continue
		}
		if h, ok := l.holder(rel, kv); ok {
			hs = append(hs, h)
		}
	}
	return hs, waiters
}

// state is key's state from its holders and waiters, each holder's
// time left still unknown (-1).
func (l kindLayout) state(key string, hs []holdKV, waiters int) driver.LockState {
	st := driver.LockState{Key: key, Waiters: waiters, Held: len(hs) > 0}
	for _, h := range hs {
		tok := l.token(h.kv)
		st.Holders = append(st.Holders, driver.Holder{Owner: h.owner, Token: tok, TTL: -1})
		st.Token = max(st.Token, tok)
	}
	return st
}

// inspectKind implements Inspect for the kind l: one read of key's
// directory, then one lease read per holder for its time left.
func (b *Backend) inspectKind(ctx context.Context, l kindLayout, key string) (_ driver.LockState, err error) {
	dir := b.kindDir(l.kind, key)
	defer func() { err = permission(err, "read the locks in "+dir) }()
	resp, err := b.cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return driver.LockState{}, fmt.Errorf("etcd: inspect %s: %w", dir, err)
	}
	hs, waiters := l.read(dir, resp.Kvs)
	st := l.state(key, hs, waiters)
	if err := b.holdersLeft(ctx, []driver.LockState{st}, [][]holdKV{hs}); err != nil {
		return driver.LockState{}, fmt.Errorf("etcd: inspect %s: %w", dir, err)
	}
	return st, nil
}

// holdersLeft fills in the time each holder of states (read as hs) has
// left on its lease, listLeases requests in flight at once; 0 for a
// lease it could not read.
func (b *Backend) holdersLeft(ctx context.Context, states []driver.LockState, hs [][]holdKV) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, listLeases)
	)
	for i := range states {
		for j, h := range hs[i] {
			if h.kv.Lease == 0 {
				continue // written without a lease: it never expires
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ttl, err := b.leaseLeft(ctx, clientv3.LeaseID(h.kv.Lease))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					first = errors.Join(first, err)
				}
				states[i].Holders[j].TTL = ttl
			}()
		}
	}
	wg.Wait()
	return first
}

// listKind implements List for the kind l: range reads of the kind's
// directories under prefix, listPage keys each, in key order, at one
// revision, until limit held keys and one more are found; then the
// holders' leases. Its cost grows with the keys of the kind under
// prefix (holders and waiters), not with the rest of the store.
func (b *Backend) listKind(ctx context.Context, l kindLayout, prefix string, limit int) (_ []driver.LockState, _ bool, err error) {
	base := b.cfg.prefix + l.kind + "/"
	defer func() { err = permission(err, "list the locks under "+base+url.PathEscape(prefix)) }()
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: etcd: list limit %d must be positive", turnstile.ErrInvalidOption, limit)
	}
	// Escaping maps each byte on its own, so the escaped keys under
	// prefix are those under the escaped prefix.
	start := base + url.PathEscape(prefix)
	end := clientv3.GetPrefixRangeEnd(start)
	var (
		states []driver.LockState
		hss    [][]holdKV
		more   bool
		rev    int64
		cur    string // the key whose directory is being read
		curKVs []*mvccpb.KeyValue
	)
	flush := func() {
		if cur == "" {
			return
		}
		key, err := url.PathUnescape(cur)
		if err == nil {
			dir := base + cur + "/"
			hs, waiters := l.read(dir, curKVs)
			if len(hs) > 0 {
				states = append(states, l.state(key, hs, waiters))
				hss = append(hss, hs)
			}
		}
		cur, curKVs = "", nil
	}
	for !more {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := b.cli.Get(ctx, start, opts...)
		if err != nil {
			return nil, false, fmt.Errorf("etcd: list %q: %w", prefix, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			esc, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), base), "/")
			if !ok {
				continue // not in a key's directory
			}
			if esc != cur {
				flush()
				if len(states) > limit {
					more = true
					break
				}
				cur = esc
			}
			curKVs = append(curKVs, kv)
		}
		if more || !resp.More || len(resp.Kvs) == 0 {
			break
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if !more {
		flush()
	}
	if len(states) > limit {
		states, hss, more = states[:limit], hss[:limit], true
	}
	if err := b.holdersLeft(ctx, states, hss); err != nil {
		return nil, false, fmt.Errorf("etcd: list %q: %w", prefix, err)
	}
	return states, more, nil
}

// forceReleaseKind implements ForceRelease for the kind l: one
// transaction deletes every holder's key of key's directory (and the
// kind's extra keys) and counts its waiters, who keep their places; then
// each removed holder's lease is read for its time left and revoked.
// Deleting the keys is what releases do, so waiters watching them wake,
// and each holder's next Extend finds its key gone and reports the hold
// lost. As for the plain lock, the transaction's revision is the token
// floor: above every removed holder's token, below every later one.
func (b *Backend) forceReleaseKind(ctx context.Context, l kindLayout, key string) (_ driver.LockState, err error) {
	dir := b.kindDir(l.kind, key)
	defer func() { err = permission(err, "remove the locks in "+dir) }()
	ops := make([]clientv3.Op, 0, len(l.holders)+len(l.extra)+1)
	ops = append(ops, clientv3.OpGet(dir+"queue/", clientv3.WithPrefix(), clientv3.WithCountOnly()))
	for _, h := range l.holders {
		if strings.HasSuffix(h, "/") {
			ops = append(ops, clientv3.OpDelete(dir+h, clientv3.WithPrefix(), clientv3.WithPrevKV()))
		} else {
			ops = append(ops, clientv3.OpDelete(dir+h, clientv3.WithPrevKV()))
		}
	}
	for _, e := range l.extra {
		ops = append(ops, clientv3.OpDelete(dir+e))
	}
	resp, err := b.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return driver.LockState{}, fmt.Errorf("etcd: force release %s: %w", dir, err)
	}
	var hs []holdKV
	for _, r := range resp.Responses[1 : 1+len(l.holders)] {
		for _, kv := range r.GetResponseDeleteRange().GetPrevKvs() {
			if h, ok := l.holder(strings.TrimPrefix(string(kv.Key), dir), kv); ok {
				hs = append(hs, h)
			}
		}
	}
	st := l.state(key, hs, int(resp.Responses[0].GetResponseRange().GetCount()))
	st.Token = uint64(resp.Header.Revision)
	// The holds are gone already; what is left is bookkeeping: how long
	// their leases had, and dropping them (they hold no key of the lock
	// now).
	_ = b.holdersLeft(ctx, []driver.LockState{st}, [][]holdKV{hs})
	revoked := map[int64]bool{}
	for _, h := range hs {
		if id := h.kv.Lease; id != 0 && !revoked[id] {
			revoked[id] = true
			b.revoke(ctx, clientv3.LeaseID(id))
		}
	}
	return st, nil
}

// Inspect implements driver.Inspector: the holders of key's permits, each
// with its token (the revision of its permit's last write) and its
// lease's time left, and the waiters queued for a permit.
func (s *Semaphore) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return s.b.inspectKind(ctx, semaphoreLayout, key)
}

// List implements driver.Inspector over the semaphores.
func (s *Semaphore) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return s.b.listKind(ctx, semaphoreLayout, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: it takes back every
// permit of key at once.
func (s *Semaphore) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return s.b.forceReleaseKind(ctx, semaphoreLayout, key)
}

// Inspect implements driver.Inspector: the holders of key's read-write
// lock — its writer or its readers — and the writers queued. Both sides
// see the same state.
func (r *ReadLock) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return r.rw.b.inspectKind(ctx, rwLayout, key)
}

// List implements driver.Inspector over the read-write locks.
func (r *ReadLock) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return r.rw.b.listKind(ctx, rwLayout, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: the writer and every
// reader go at once; writers queued keep their places.
func (r *ReadLock) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return r.rw.b.forceReleaseKind(ctx, rwLayout, key)
}

// Inspect implements driver.Inspector, as ReadLock's.
func (w *WriteLock) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return w.rw.b.inspectKind(ctx, rwLayout, key)
}

// List implements driver.Inspector, as ReadLock's.
func (w *WriteLock) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return w.rw.b.listKind(ctx, rwLayout, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser, as ReadLock's.
func (w *WriteLock) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return w.rw.b.forceReleaseKind(ctx, rwLayout, key)
}

// Inspect implements driver.Inspector: the holder of key's reentrant
// lock, with the token of its first acquisition, and its waiters.
func (r *Reentrant) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return r.b.inspectKind(ctx, reentrantLayout, key)
}

// List implements driver.Inspector over the reentrant locks.
func (r *Reentrant) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return r.b.listKind(ctx, reentrantLayout, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: the hold ends however
// often its owner entered it.
func (r *Reentrant) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return r.b.forceReleaseKind(ctx, reentrantLayout, key)
}
