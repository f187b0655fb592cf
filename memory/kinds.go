package memory

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds beside the plain lock — Reentrant, Semaphore, ReadWrite
// and Fair — are views of a Backend, each a driver.Backend of its own for
// turnstile.New. Their tokens come from the Backend's one counter, so they
// increase per key across every kind. Reentrant, semaphore and read-write
// locks live in maps of their own (one lock for all of them: an
// in-process store serves a few thousand locks a second at most), so a
// kind's lock and the plain lock on one name do not exclude each other;
// the fair lock is the plain lock itself, with a queue beside it.
//
// Holds expire like the plain lock's: a hold not renewed within its TTL is
// gone at the next call that looks at its key.

var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
	_ driver.Fairer      = (*Backend)(nil)
)

// kinds holds the lock kinds' state of one Backend.
type kinds struct {
	mu        sync.Mutex
	reentrant map[string]*reentrantHold
	sems      map[string]*semHold
	rws       map[string]*rwHold
	queues    map[string]*fairQueue
}

// lock locks the kinds' state, making its maps on first use.
func (k *kinds) lock() {
	k.mu.Lock()
	if k.reentrant == nil {
		k.reentrant = map[string]*reentrantHold{}
		k.sems = map[string]*semHold{}
		k.rws = map[string]*rwHold{}
		k.queues = map[string]*fairQueue{}
	}
}

// holders are owners with the expiry of each one's hold (semaphore
// permits, readers, waiting writers' claims).
type holders map[string]time.Time

// prune drops the expired holds.
func (h holders) prune(now time.Time) {
	for o, exp := range h {
		if !now.Before(exp) {
			delete(h, o)
		}
	}
}

// live reports whether owner holds a hold that has not expired.
func (h holders) live(owner string, now time.Time) bool {
	exp, ok := h[owner]
	return ok && now.Before(exp)
}

// list returns the live holds, by owner, as driver.Holders.
func (h holders) list(now time.Time, token func(string) uint64) []driver.Holder {
	var out []driver.Holder
	for o, exp := range h {
		if now.Before(exp) {
			out = append(out, driver.Holder{Owner: o, Token: token(o), TTL: exp.Sub(now)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Owner < out[j].Owner })
	return out
}

// extendMany renews a batch through one kind's Extend.
func extendMany(ctx context.Context, reqs []driver.ExtendRequest, extend func(context.Context, string, string, time.Duration) (bool, error)) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		res[i].OK, res[i].Err = extend(ctx, r.Key, r.Owner, r.TTL)
	}
	return res
}

// ReentrantView implements driver.Reentranter: a *Reentrant.
func (b *Backend) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	return &Reentrant{b: b}, nil
}

// SemaphoreView implements driver.Semaphorer: a *Semaphore of
// cfg.Permits permits.
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return &Semaphore{b: b, permits: cfg.Permits}, nil
}

// ReadWriteView implements driver.ReadWriter: a *ReadLock and a
// *WriteLock whose waiting writers claim the lock for cfg.Claim().
func (b *Backend) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	rw := &rwLock{b: b, claim: cfg.Claim()}
	return &ReadLock{rw}, &WriteLock{rw}, nil
}

// FairView implements driver.Fairer: a *Fair whose first waiter looks
// again every cfg.PollInterval (5 ms by default). Its waiters live as
// long as their process, so cfg.WaiterTimeout has no effect.
func (b *Backend) FairView(cfg driver.KindConfig) (driver.Backend, error) {
	return &Fair{b: b, poll: cmp.Or(cfg.PollInterval, defaultFairPoll)}, nil
}

// sortStates orders List's results by key.
func sortStates(s []driver.LockState) {
	sort.Slice(s, func(i, j int) bool { return s[i].Key < s[j].Key })
}

// kindHolds are the holds of one lock kind in b's kinds: the map that
// keeps them, read with the kinds locked, and the function that
// describes one (a missing hold, a free key).
type kindHolds[H any] struct {
	b     *Backend
	m     func(*kinds) map[string]H
	state func(key string, h H, now time.Time) driver.LockState
}

// inspect describes key's hold.
func (t kindHolds[H]) inspect(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	k := &t.b.kinds
	k.lock()
	defer k.mu.Unlock()
	return t.state(key, t.m(k)[key], time.Now()), nil
}

// list collects the states of the held keys with prefix, at most limit.
func (t kindHolds[H]) list(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	k := &t.b.kinds
	k.lock()
	defer k.mu.Unlock()
	now := time.Now()
	var out []driver.LockState
	for key, h := range t.m(k) {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		if st := t.state(key, h, now); st.Held {
			out = append(out, st)
		}
	}
	sortStates(out)
	if limit >= 0 && len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// forceRelease removes key's hold and describes it as it was, with the
// token counter as its Token, which every later token passes.
func (t kindHolds[H]) forceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockState{}, err
	}
	k := &t.b.kinds
	k.lock()
	defer k.mu.Unlock()
	m := t.m(k)
	st := t.state(key, m[key], time.Now())
	delete(m, key)
	st.Token = t.b.tokens.Load()
	return st, nil
}

// PermitsError is the refusal of a semaphore's permit while the key's
// permits are held with another number. It matches
// turnstile.ErrInvalidOption (errors.Is).
type PermitsError struct {
	Key   string
	Held  int // the number the key's permits are held with
	Asked int // the number of the refused Semaphore
}

func (e *PermitsError) Error() string {
	return fmt.Sprintf("%v: the permits of %q are held with %d permits; this semaphore has %d", driver.ErrInvalidOption, e.Key, e.Held, e.Asked)
}

// Unwrap makes a PermitsError match turnstile.ErrInvalidOption.
func (e *PermitsError) Unwrap() error { return driver.ErrInvalidOption }
