package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// semaphoreTries bounds one Acquire's optimistic attempts, each of which
// lost to another acquisition of the same key; then it reports the key
// as not acquired, and the Client's backoff decides.
const semaphoreTries = 32

// Semaphore is the view of a Backend that turnstile.Semaphore returns: up
// to a fixed number of owners hold each key at once (Curator's
// InterProcessSemaphoreV2), each lease one permit, and one owner holds
// at most one permit of a key.
//
// The permits of key K are the ephemeral lease nodes in the directory
// Dir(K)+".semaphore", one per holder, named <escaped owner>.<permits>:
// the number of permits is stored with each holder. An acquisition
// reads the directory's children and its data version, and, if fewer
// leases than permits are held, all with its own number, creates its
// lease and writes the directory in one multi-op conditional on that
// version. So two acquisitions that read the same holders cannot both
// succeed: the loser reads again. Leases only ever leave outside these
// multi-ops (releases, expired sessions), which can only free permits,
// so a lease is never granted beyond the number. (ZooKeeper removes the
// directory once it is empty, and a new one counts its version from 0
// again: an acquisition whose multi-op met a directory other than the
// one it read gives its lease back and reads again.) While any lease is
// held with one number, an acquisition through a Semaphore made with
// another is refused with an error matching turnstile.ErrInvalidOption
// that names both; once none is held, the next acquisition's number
// holds. Nodes carry the Backend's ACL.
//
// The fencing token of a permit is the zxid of the multi-op that created
// its lease: zxids grow with every write to the ensemble, so tokens
// increase and no two permits share one. Permits expire like locks: after
// the TTL without an Extend this Backend deletes the lease, and when a
// session ends ZooKeeper does.
//
// A Semaphore is driver.Shared: a Client's waiters contend on their own
// rather than in its local line, so they take free permits together. It
// is a driver.Notifier: waiters watch the lease directory and try again
// when a lease leaves.
type Semaphore struct {
	b       *Backend
	permits int

	mu      sync.Mutex
	watches map[string]*leaseWatch // of keys with waiters
}

var (
	_ driver.Backend  = (*Semaphore)(nil)
	_ driver.Shared   = (*Semaphore)(nil)
	_ driver.Notifier = (*Semaphore)(nil)
	_ driver.Namer    = (*Semaphore)(nil)
)

// Permits returns how many owners may hold a key at once.
func (s *Semaphore) Permits() int { return s.permits }

// Name implements driver.Namer.
func (s *Semaphore) Name() string { return fmt.Sprintf("%s semaphore(%d)", s.b.Name(), s.permits) }

// Shared implements driver.Shared: up to permits holders at once, so a
// Client lets its waiters contend on their own.
func (s *Semaphore) Shared() bool { return s.permits > 1 }

func (s *Semaphore) dir(key string) string { return s.b.kindDir(key, "semaphore") }

// lease is one holder's node in a semaphore's directory.
type lease struct {
	name    string
	owner   string // escaped
	permits int
}

// parseLease splits a lease node's name; ok is false for names this
// package did not create.
func parseLease(name string) (lease, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return lease{}, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 1 || strconv.Itoa(n) != name[i+1:] {
		return lease{}, false
	}
	return lease{name: name, owner: name[:i], permits: n}, true
}

// Acquire implements driver.Backend: it takes one permit of key for
// owner if one is free. If owner holds one already, it is the same
// permit again, with its token. Two round trips when nobody else
// acquires the key at the same moment.
func (s *Semaphore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	dir, eo, hk := s.dir(key), escape(owner), kindHold("semaphore", key, owner)
	defer func() { err = s.b.permission(err, "take a permit in "+dir) }()
	if err := s.b.live(); err != nil {
		return 0, false, err
	}
	if err := s.b.fitTTL(ttl); err != nil {
		return 0, false, err
	}
	mine := dir + "/" + eo + "." + strconv.Itoa(s.permits)
	for range semaphoreTries {
		l, err := s.b.children(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			if err := s.b.mkdir(ctx, dir); err != nil {
				return 0, false, err
			}
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("zookeeper: list %s: %w", dir, err)
		}
		if err := s.b.checkDir(ctx, dir, l.stat.Czxid); errors.Is(err, zk.ErrNoNode) {
			continue // removed just now: list again
		} else if err != nil {
			return 0, false, err
		}
		held := 0
		for _, name := range l.names {
			ls, ok := parseLease(name)
			if !ok {
				continue
			}
			if ls.permits != s.permits {
				return 0, false, fmt.Errorf("%w: zookeeper: the permits of %q are held as a semaphore of %d permits; this one has %d", turnstile.ErrInvalidOption, key, ls.permits, s.permits)
			}
			if ls.owner == eo {
				return s.again(ctx, hk, dir+"/"+name, ttl)
			}
			held++
		}
		if held >= s.permits {
			return 0, false, nil
		}
		ops := []any{
			&zk.SetDataRequest{Path: dir, Version: l.stat.Version},
			&zk.CreateRequest{Path: mine, Acl: s.b.acl, Flags: zk.FlagEphemeral},
		}
		res, err := callUndo(ctx, func() ([]zk.MultiResponse, error) { return s.b.conn.Multi(ops...) }, func(res []zk.MultiResponse) {
			if len(res) == 2 && res[1].Error == nil {
				s.b.cleanup(mine) // created for a caller whose context ended
			}
		})
		if err == nil && len(res) == 2 && res[0].Error == nil && res[1].Error == nil && res[0].Stat != nil {
			if res[0].Stat.Czxid != l.stat.Czxid {
				// ZooKeeper removed the empty directory after the
				// listing and it was made again: its version counts
				// anew, and may have met the one read by chance.
				// Give the lease back and look again.
				if err := s.b.remove(ctx, mine); err != nil {
					return 0, false, err
				}
				continue
			}
			s.b.arm(hk, mine, ttl)
			return uint64(res[0].Stat.Mzxid), true, nil
		}
		if err == nil {
			err = multiErr(res, nil)
		}
		// Another acquisition (perhaps of the same owner) came first, or
		// the empty directory was removed: read again.
		if !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoNode) {
			return 0, false, fmt.Errorf("zookeeper: create lease in %s: %w", dir, err)
		}
	}
	return 0, false, nil
}

// again is owner's permit taken again: its token is the zxid that
// created its lease.
func (s *Semaphore) again(ctx context.Context, hk holdKey, p string, ttl time.Duration) (uint64, bool, error) {
	st, err := s.b.stat(ctx, p)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("zookeeper: read %s: %w", p, err)
	}
	s.b.armAtLeast(hk, p, ttl)
	return uint64(st.Czxid), true, nil
}

// leaseOf returns the path of owner's lease of key, or "".
func (s *Semaphore) leaseOf(ctx context.Context, key, owner string) (string, error) {
	dir, eo := s.dir(key), escape(owner)
	names, err := call(ctx, func() ([]string, error) {
		c, _, err := s.b.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("zookeeper: list %s: %w", dir, err)
	}
	for _, n := range names {
		if ls, ok := parseLease(n); ok && ls.owner == eo {
			return dir + "/" + n, nil
		}
	}
	return "", nil
}

// Extend implements driver.Backend: it checks that owner's lease exists
// (one round trip) and restarts its TTL timer.
func (s *Semaphore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	hk := kindHold("semaphore", key, owner)
	defer func() { err = s.b.permission(err, "read the permits in "+s.dir(key)) }()
	if err := s.b.live(); err != nil {
		return false, err
	}
	if lost, err := s.b.renewable(hk, ttl); err != nil || lost {
		if lost {
			s.b.giveUp(ctx, hk)
		}
		return false, err
	}
	h, expired := s.b.pause(hk)
	if expired {
		return false, nil
	}
	var p string
	if h != nil {
		p = h.path
	}
	held := false
	if p != "" {
		held, err = call(ctx, func() (bool, error) {
			ok, _, err := s.b.conn.Exists(p)
			return ok, err
		})
	} else {
		p, err = s.leaseOf(ctx, key, owner)
		held = p != ""
	}
	if h != nil {
		s.b.resume(hk, h, ttl, held, err == nil && !held)
	}
	if err != nil {
		return false, err
	}
	return held, nil
}

// Release implements driver.Backend: it deletes owner's lease, giving
// back its permit.
func (s *Semaphore) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	hk := kindHold("semaphore", key, owner)
	defer func() { err = s.b.permission(err, "release a permit in "+s.dir(key)) }()
	if err := s.b.live(); err != nil {
		return false, err
	}
	p, ok := s.b.take(hk)
	if !ok {
		if p, err = s.leaseOf(ctx, key, owner); err != nil || p == "" {
			return false, err
		}
	}
	return s.b.releaseNode(ctx, p, "delete")
}

// Released implements driver.Notifier: when leases leave key's
// directory, as many of the Semaphore's waiters as permits were freed
// receive a value, taken at random; the others' timers retry as usual.
// Leases that arrive wake nobody: they free no permit. The waiters of one Semaphore on one key
// share one children watch, set again after each change, so a release
// costs one listing per Semaphore rather than per waiter.
func (s *Semaphore) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := s.b.live(); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	w := s.watches[key]
	if w == nil {
		if s.watches == nil {
			s.watches = make(map[string]*leaseWatch)
		}
		w = &leaseWatch{subs: make(map[chan struct{}]bool), done: make(chan struct{})}
		s.watches[key] = w
		go s.watch(key, w)
	}
	w.subs[ch] = true
	s.mu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(w.subs, ch)
			if len(w.subs) == 0 && s.watches[key] == w {
				delete(s.watches, key)
				close(w.done)
			}
		})
	}
	return ch, stop, nil
}

// leaseWatch is the watch the waiters of one key share.
type leaseWatch struct {
	subs map[chan struct{}]bool // guarded by Semaphore.mu
	done chan struct{}          // closed when the last waiter leaves
}

// watch lists key's leases and sets a children watch, again after each
// change, and tells the waiters when a lease has left. With no directory
// there is no lease, and it watches for the directory instead. It ends
// when the last waiter leaves, or when ZooKeeper refuses the watch: then
// the waiters' own timers take over, and the next waiter sets a new one.
func (s *Semaphore) watch(key string, w *leaseWatch) {
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.watches[key] == w {
			delete(s.watches, key)
		}
	}()
	dir := s.dir(key)
	var names []string
	for {
		now, _, ev, err := s.b.conn.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			if ok, _, ev, err = s.b.conn.ExistsW(dir); err == nil && ok {
				continue // made just now: list it
			}
		}
		if err != nil {
			return
		}
		if n := left(names, now); n > 0 {
			// One waiter per permit freed, taken at random: the others
			// would only find the permit taken.
			s.mu.Lock()
			for ch := range w.subs {
				if n == 0 {
					break
				}
				select {
				case ch <- struct{}{}:
					n--
				default:
				}
			}
			s.mu.Unlock()
		}
		names = now
		select {
		case <-ev:
		case <-w.done:
			return
		}
	}
}

// left returns how many names of before are missing from now.
func left(before, now []string) int {
	in := make(map[string]bool, len(now))
	for _, n := range now {
		in[n] = true
	}
	gone := 0
	for _, n := range before {
		if !in[n] {
			gone++
		}
	}
	return gone
}
