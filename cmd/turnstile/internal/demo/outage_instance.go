//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/postgres"
	tsredis "github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// grantStore is one store of an instance's fallback pair. It notes which
// store granted each lease, by owner, for the figures of the phases.
type grantStore struct {
	driver.Backend
	label  string
	grants *sync.Map // owner → label
}

// Name implements driver.Namer.
func (g *grantStore) Name() string { return driver.Name(g.Backend) }

// Acquire implements driver.Backend.
func (g *grantStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	token, ok, err := g.Backend.Acquire(ctx, key, owner, ttl)
	if ok && err == nil {
		g.grants.Store(owner, g.label)
	}
	return token, ok, err
}

// outageInstance is one service instance: its own Redlock connections,
// secondary backend, fallback breaker and Client.
type outageInstance struct {
	name   string
	index  int
	rl     *redlock.Backend // the primary, for the warm-up outside the breaker
	fb     *fallback.Backend
	client *turnstile.Client
	grants sync.Map
	// opened and closed are when the breaker last opened and closed, in
	// nanoseconds since the start; 0: never.
	opened, closed atomic.Int64
}

// outageKey is a lock key with the token of the last critical section
// that began on it.
type outageKey struct {
	mu        sync.Mutex
	name      string
	last      uint64
	lastStore string
	lastPhase int
}

// newInstance connects one instance to the nodes and the secondary.
func (o *outage) newInstance(ctx context.Context, i int) (inst *outageInstance, closeAll func(), err error) {
	inst = &outageInstance{name: "instance-" + strconv.Itoa(i+1), index: i}
	var closers []func()
	closeAll = func() {
		for j := len(closers) - 1; j >= 0; j-- {
			closers[j]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// RESP2 for the in-process nodes: see startEnv.
	// The node timeout is the longest a lease's TTL allows, so that a
	// busy machine's slow answers are not taken for dead nodes.
	//
	// WithWaitAll: without it, an acquisition that hears "held" from the
	// two live nodes and one failure returns "not acquired" before the
	// other two dead nodes have failed, and the breaker takes that for a
	// healthy primary. A probe meets such a key whenever another
	// instance's probe holds it on the live nodes, so the breakers would
	// close one by one while the quorum is still lost, further apart than
	// the grace allows. Waiting for every node costs nothing here: dead
	// nodes refuse the connection at once.
	rl, err := redlock.Dial(dctx, o.addrs(), rueidis.ClientOption{AlwaysRESP2: !o.real},
		redlock.WithRestartQuarantine(o.quar), redlock.WithNodeTimeout(o.nodeTimeout()), redlock.WithWaitAll())
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = rl.Close() })
	inst.rl = rl

	var second driver.Backend
	switch {
	case o.cfg.secondary != nil:
		second = o.cfg.secondary
	case o.env.pool != nil:
		cc, err := pgx.ParseConfig(o.env.pgURL)
		if err != nil {
			return nil, nil, redact.Error(fmt.Errorf("postgres %s: %w", redact.URL(o.env.pgURL), err), o.env.pgURL)
		}
		pb, err := postgres.Dial(dctx, cc, postgres.WithConns(2))
		if err != nil {
			return nil, nil, redact.Error(err, o.env.pgURL)
		}
		closers = append(closers, func() { _ = pb.Close() })
		second = pb
	default:
		rb, err := tsredis.New(o.env.rc)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { _ = rb.Close() })
		second = rb
	}

	inst.fb, err = fallback.New(
		&grantStore{Backend: rl, label: primaryLabel, grants: &inst.grants},
		&grantStore{Backend: second, label: o.secLabel, grants: &inst.grants},
		fallback.WithGrace(o.cfg.grace()), fallback.WithOpenTimeout(o.cfg.openTimeout()),
		fallback.WithOnStateChange(func(from, to fallback.State) { o.breakerChanged(inst, from, to) }))
	if err != nil {
		return nil, nil, err
	}
	opts := append(slices.Clone(o.env.clientOptions), turnstile.WithTTL(o.cfg.ttl), turnstile.WithInstanceID(inst.name))
	if inst.client, err = turnstile.New(inst.fb, opts...); err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = inst.client.Close() })
	return inst, closeAll, nil
}

// breakerChanged runs under an instance's breaker lock: it notes the
// time and says so, and must return quickly.
func (o *outage) breakerChanged(inst *outageInstance, from, to fallback.State) {
	now := int64(o.since())
	switch {
	case from == fallback.StateClosed && to == fallback.StateOpen:
		inst.opened.Store(now)
		o.say("%s: breaker open after %d consecutive failures; %s grants once the %v grace has passed", inst.name, fallback.DefaultTripAfter, o.secLabel, o.cfg.grace())
	case to == fallback.StateClosed:
		inst.closed.Store(now)
		o.say("%s: breaker closed, its probe of the Redlock succeeded; the Redlock grants once the %v grace has passed", inst.name, o.cfg.grace())
	}
}

// breakerSpan is how long after since the first and the last instance's
// breaker changed (by at), and how many changed after since.
func (o *outage) breakerSpan(at func(*outageInstance) int64, since time.Duration) (first, last time.Duration, n int) {
	for _, inst := range o.inst {
		d := time.Duration(at(inst)) - since
		if d < 0 {
			continue
		}
		if n == 0 || d < first {
			first = d
		}
		last = max(last, d)
		n++
	}
	return first, last, n
}

// warmUp takes and releases the keys on every instance's Redlock,
// outside the breakers, until they are granted: fresh nodes load the
// scripts on their first calls, and refuse locks during their restart
// quarantine (which a Redis node counts per key's hash slot, from the
// first acquisition when its process has just started); a breaker would
// count either as failures.
func (o *outage) warmUp(ctx context.Context) error {
	if o.quar > 0 {
		o.env.progress("redlock-outage: waiting out the fresh nodes' %v restart quarantine...", o.quar)
	}
	wctx, cancel := context.WithTimeout(ctx, o.quar+outageWait)
	defer cancel()
	for _, inst := range o.inst {
		owner := "warm-up/" + inst.name
		for _, key := range o.keys {
			for {
				_, ok, err := inst.rl.Acquire(wctx, key.name, owner, o.cfg.ttl)
				if err == nil && ok {
					_, _ = inst.rl.Release(wctx, key.name, owner)
					break
				}
				if wctx.Err() != nil {
					if err := ctx.Err(); err != nil {
						return err
					}
					return fmt.Errorf("the Redlock granted no lock within %v of starting (last: %v)", o.quar+outageWait, err)
				}
				_ = sleepCtx(wctx, 20*time.Millisecond)
			}
		}
	}
	return nil
}

// work is one instance's loop: take a key, hold it, write its token to
// the fenced register, release it; until the run stops.
func (o *outage) work(ctx context.Context, inst *outageInstance) {
	for n := inst.index; !o.stopping.Load() && ctx.Err() == nil; n++ {
		ki := n % len(o.keys)
		key := o.keys[ki]
		ph := int(o.phase.Load())
		t0 := time.Now()
		l, err := inst.client.TryAcquire(ctx, key.name)
		lat := time.Since(t0)
		switch {
		case err == nil:
			label, _ := inst.grants.LoadAndDelete(l.Owner())
			store, _ := label.(string)
			o.mu.Lock()
			st := &o.stats[ph]
			st.granted[store]++
			st.keys[store] |= 1 << ki
			st.grantLat = append(st.grantLat, lat)
			o.mu.Unlock()
			o.critical(ctx, key, l, store, ph)
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, turnstile.ErrNotAcquired):
			o.mu.Lock()
			o.stats[ph].busy++
			o.mu.Unlock()
		default:
			o.mu.Lock()
			st := &o.stats[ph]
			if st.failed == 0 {
				st.firstFail, st.firstErr = o.since(), err.Error()
			}
			st.failed++
			st.failLat = append(st.failLat, lat)
			o.mu.Unlock()
		}
		_ = sleepCtx(ctx, o.cfg.pause())
	}
}

// critical is one critical section: it checks that the lease's token is
// above the last one of a critical section of the key, holds the lock,
// writes the token through the fenced register, and releases.
func (o *outage) critical(ctx context.Context, key *outageKey, l *turnstile.Lease, store string, ph int) {
	token := l.Token()
	key.mu.Lock()
	// A lease that ended before its critical section began is no holder;
	// a later one may already have begun.
	if l.Validity() == 0 {
		key.mu.Unlock()
		o.mu.Lock()
		o.checks.lateStarts++
		o.mu.Unlock()
	} else {
		o.mu.Lock()
		o.checks.began(key, token, store, ph)
		o.mu.Unlock()
		key.last, key.lastStore, key.lastPhase = token, store, ph
		key.mu.Unlock()
	}

	_ = sleepCtx(ctx, o.cfg.hold())
	err := o.register.Set(ctx, key.name, token, fence.DataKey(key.name, "register"), strconv.FormatUint(token, 10))
	current := l.Validity() > 0 // after the write: a holder that was still current when refused
	o.mu.Lock()
	o.checks.wrote(err, current, ctx.Err() != nil, func() string {
		return fmt.Sprintf("token %d from %s (%s), %v of its lease left: %v", token, store, outagePhaseNames[ph], l.Validity().Round(time.Millisecond), err)
	})
	o.mu.Unlock()
	if err := l.Release(ctx); err != nil && ctx.Err() == nil {
		o.mu.Lock()
		o.stats[ph].releaseFailed++
		o.mu.Unlock()
	}
}
