//go:build unix

package demo

import (
	"context"
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
