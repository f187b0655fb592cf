package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
)

// operatorTimeout bounds one node's answer to Inspect or ForceRelease:
// longer than the node timeout of the lock path, since an operator waits
// gladly, but short enough that one silent node does not hold the others'
// answer for long.
func (b *Backend) operatorTimeout() time.Duration {
	return max(10*b.cfg.nodeTimeout, 2*time.Second)
}

// Inspect implements driver.Inspector: it asks every node at once and
// reports the holder a quorum of nodes agrees on, with the token a quorum
// of them reports (see agree) and the shortest time left; Token is the largest token any
// node issued. A key held on fewer nodes than a quorum is reported free:
// no one holds the Redlock. It fails with an error matching
// ErrNoQuorum when fewer than a quorum of nodes answer, and
// with turnstile.ErrUnsupported when a node cannot be inspected.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	if err := b.check(ctx, 0); err != nil {
		return driver.LockState{}, err
	}
	ins, err := b.inspectors()
	if err != nil {
		return driver.LockState{}, err
	}
	states, err := ask(ctx, b, "inspect", b.operatorTimeout(), func(ctx context.Context, i int) (driver.LockState, error) {
		return ins[i].Inspect(ctx, key)
	})
	if err != nil {
		return driver.LockState{}, err
	}
	return b.agree(key, states), nil
}

// List implements driver.Inspector: every node lists up to limit+1 held
// locks under prefix, and a lock is listed when a quorum of the nodes
// lists it with the same owner. It is exact while each node holds at most
// limit+1 locks under prefix; beyond that nodes may list different ones,
// so List may return fewer than limit locks, with more=true. Each node
// scans as its own List documents.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	if err := b.check(ctx, 0); err != nil {
		return nil, false, err
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: redlock list limit %d must be positive", turnstile.ErrInvalidOption, limit)
	}
	ins, err := b.inspectors()
	if err != nil {
		return nil, false, err
	}
	var mu sync.Mutex
	anyMore := false
	lists, err := ask(ctx, b, "list", 0, func(ctx context.Context, i int) ([]driver.LockState, error) {
		states, more, err := ins[i].List(ctx, prefix, limit+1)
		if more {
			mu.Lock()
			anyMore = true
			mu.Unlock()
		}
		return states, err
	})
	if err != nil {
		return nil, false, err
	}
	byKey := map[string][]driver.LockState{}
	var keys []string
	for _, l := range lists {
		for _, st := range l {
			if _, seen := byKey[st.Key]; !seen {
				keys = append(keys, st.Key)
			}
			byKey[st.Key] = append(byKey[st.Key], st)
		}
	}
	slices.Sort(keys)
	var out []driver.LockState
	more := anyMore
	for _, k := range keys {
		st := b.agree(k, byKey[k])
		if !st.Held {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, st)
	}
	return out, more, nil
}

// ForceRelease implements driver.ForceReleaser: every node removes the
// lock by force (each raising its own fence first), and a quorum of them
// must succeed, or the error matches ErrNoQuorum. The returned
// holder is the one a quorum of nodes held the lock for; the returned
// Token, the fence floor, is the quorum-th smallest of the nodes' floors
// (a node that failed counts as 0): every later Redlock token is the
// largest of a quorum's, and every quorum has a node whose floor is at
// least that. It is also above every token a Client handed the removed
// lease on with (driver.TokenRoom): the lease's token went to a quorum's
// fences, each node's floor is above its own fence's run, and any two
// quorums share a node.
//
// A node that missed the removed holder's grant, or its token's write
// back, has a lower floor of its own, and so raised a guard key of
// package fence it keeps to that lower floor only; a node that did not
// hold the lock at all raised nothing. Such nodes' guards are
// then raised to the Redlock's floor (a node that can: a *redis.Backend
// and its views, RaiseGuard), so that a guard on any node refuses every
// token of the removed holder: one more round trip to those nodes, none
// when every node held the lock with the Redlock's floor.
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := b.check(ctx, 0); err != nil {
		return driver.LockState{}, err
	}
	frs := make([]driver.ForceReleaser, len(b.nodes))
	for i, n := range b.nodes {
		fr, ok := n.b.(driver.ForceReleaser)
		if !ok {
			return driver.LockState{}, fmt.Errorf("%w: redlock %s cannot remove a lock by force (no driver.ForceReleaser)", turnstile.ErrUnsupported, n.name)
		}
		frs[i] = fr
	}
	floors := make([]uint64, len(b.nodes))
	answered := make([]bool, len(b.nodes))
	held := make([]bool, len(b.nodes))
	states, err := ask(ctx, b, "force release", b.operatorTimeout(), func(ctx context.Context, i int) (driver.LockState, error) {
		st, err := frs[i].ForceRelease(ctx, key)
		if err == nil {
			// each goroutine writes its own elements
			floors[i], answered[i], held[i] = st.Token, true, st.Held
		}
		return st, err
	})
	if err != nil {
		return driver.LockState{}, err
	}
	st := b.agree(key, states)
	sorted := slices.Clone(floors)
	slices.Sort(sorted)
	st.Token = sorted[b.quorum-1]
	return st, b.raiseGuards(ctx, key, st.Token, floors, answered, held)
}

// guardRaiser is a node that raises package fence's guard key of a
// resource it keeps (redis.Backend.RaiseGuard).
type guardRaiser interface {
	RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error)
}

// raiseGuards raises the guard key of key to floor on every node that
// answered the forced release without raising it that far itself: with
// a floor of its own below it, or without the lock (a node that did not
// hold it changes nothing, its guard included, whatever its fence).
func (b *Backend) raiseGuards(ctx context.Context, key string, floor uint64, floors []uint64, answered, held []bool) error {
	errs := make([]error, len(b.nodes))
	var wg sync.WaitGroup
	for i, n := range b.nodes {
		gr, ok := n.b.(guardRaiser)
		if !ok || !answered[i] || (held[i] && floors[i] >= floor) {
			continue
		}
		wg.Go(func() {
			nctx, stop := nodeContext(ctx, b.operatorTimeout())
			defer stop()
			if _, err := gr.RaiseGuard(nctx, key, floor); err != nil {
				errs[i] = fmt.Errorf("%s: %w", n.name, nodeError(ctx, nctx, err))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redlock: force release of %q removed the lock, but raising the fence guard key to the floor %d failed (run it again): %w", key, floor, err)
	}
	return nil
}

// inspectors returns every node's Inspector, or an error matching
// turnstile.ErrUnsupported naming a node that has none.
func (b *Backend) inspectors() ([]driver.Inspector, error) {
	ins := make([]driver.Inspector, len(b.nodes))
	for i, n := range b.nodes {
		in, ok := n.b.(driver.Inspector)
		if !ok {
			return nil, fmt.Errorf("%w: redlock %s cannot be inspected (no driver.Inspector)", turnstile.ErrUnsupported, n.name)
		}
		ins[i] = in
	}
	return ins, nil
}

// ask calls f for every node of b at once, each bounded by timeout (0:
// by ctx only), and returns the answers of the nodes that gave one, or a
// *QuorumError when fewer than a quorum did.
func ask[T any](ctx context.Context, b *Backend, op string, timeout time.Duration, f func(ctx context.Context, i int) (T, error)) ([]T, error) {
	answers := make([]T, len(b.nodes))
	errs := make([]error, len(b.nodes))
	var wg sync.WaitGroup
	for i := range b.nodes {
		wg.Go(func() {
			nctx, stop := ctx, func() {}
			if timeout > 0 {
				nctx, stop = nodeContext(ctx, timeout)
			}
			defer stop()
			answers[i], errs[i] = f(nctx, i)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", b.nodes[i].name, nodeError(ctx, nctx, errs[i]))
			}
		})
	}
	wg.Wait()
	var ok []T
	var failed []error
	for i := range b.nodes {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		ok = append(ok, answers[i])
	}
	if len(ok) < b.quorum {
		return nil, &QuorumError{Op: op, Nodes: len(b.nodes), Quorum: b.quorum, Yes: len(ok), Failed: len(failed), Err: errors.Join(failed...)}
	}
	return ok, nil
}

// agree merges the states nodes reported for key: the lock is held when
// a quorum of nodes names one owner. Its token is the one a quorum of
// those nodes reports — the Redlock lease's: Acquire writes the lease's
// token back to a quorum of the nodes that granted it — or else, where
// the nodes keep their own tokens (nodes that cannot raise a holder's
// token), the largest.
func (b *Backend) agree(key string, states []driver.LockState) driver.LockState {
	out := driver.LockState{Key: key, Waiters: -1}
	type vote struct {
		n      int
		tokens map[uint64]int
		max    uint64
		ttl    time.Duration
	}
	votes := map[string]*vote{}
	for _, st := range states {
		out.Token = max(out.Token, st.Token)
		if !st.Held {
			continue
		}
		for _, h := range st.Holders {
			v := votes[h.Owner]
			if v == nil {
				v = &vote{ttl: h.TTL, tokens: map[uint64]int{}}
				votes[h.Owner] = v
			}
			v.n++
			v.tokens[h.Token]++
			v.max = max(v.max, h.Token)
			v.ttl = min(v.ttl, h.TTL)
		}
	}
	var owners []string
	for o, v := range votes {
		if v.n >= b.quorum {
			owners = append(owners, o)
		}
	}
	slices.Sort(owners)
	for _, o := range owners {
		v := votes[o]
		tok := v.max
		for t, n := range v.tokens {
			if n >= b.quorum {
				tok = t
			}
		}
		out.Held = true
		out.Holders = append(out.Holders, driver.Holder{Owner: o, Token: tok, TTL: v.ttl})
	}
	return out
}
