package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// faultEnv is what a fault acts on.
type faultEnv struct {
	t    target
	pool *workers
	ttl  time.Duration
	log  io.Writer
	// cut is when the fault cut the key's primary off from its replica
	// (Unix ns; 0: it did not): grants from then until the heal begins
	// cannot reach a replica (window.Cut).
	cut int64
}

// fault is one kind of failure. inject starts it and returns the function
// that heals it (nil: the fault is instantaneous, as a kill).
type fault struct {
	name    string
	desc    string
	applies func(t target) string // "" or why the fault does not apply
	inject  func(ctx context.Context, env *faultEnv) (heal func() error, err error)
	length  func(ttl time.Duration) time.Duration // how long the fault lasts before it heals
	// long: inject while a holder is in a long hold between its reads and
	// its writes, one that outlasts the fault — the worst moment for a
	// fault that can lose the lock.
	long bool
	// lockDelay (nil: none) is the cell's turnstile.WithLockDelay: a
	// lock whose holder failed stays taken that long past its lease.
	lockDelay func(ttl time.Duration) time.Duration
}

// delay is f's lock delay for leases of ttl, 0 without one.
func (f fault) delay(ttl time.Duration) time.Duration {
	if f.lockDelay == nil {
		return 0
	}
	return f.lockDelay(ttl)
}

// longHold is how long a holder in a long hold (fault.long) waits between
// its reads and its writes, counted from before the runner learns of the
// hold. It outlasts the fault by a lease, so that the lock can pass to
// another worker meanwhile, and by 2 s more: on a busy machine a restart
// or a grant can take that long. With a lock delay the lock must not pass
// meanwhile: the holder writes a lease after the fault, 2 s before TTL +
// delay from its grant has run (delayed) — the late write that the delay
// is for. A hold as long as TTL + delay would write just as the delay
// ends, and another worker granted the lock then would lose it.
func (f fault) longHold(ttl time.Duration) time.Duration {
	if d := f.delay(ttl); d > 0 {
		return min(f.length(ttl)+ttl, ttl+d-2*time.Second)
	}
	return f.length(ttl) + ttl + 2*time.Second
}

func always(target) string { return "" }

// primary is the member that member faults hit for the cell's key.
func (env *faultEnv) primary() *member { return env.t.base().members[env.t.primary(env.pool.key)] }

// proxies carry the clients' traffic to the members.
func (env *faultEnv) proxies() []*toxiproxy.Proxy { return env.t.base().proxies }

func needClock(t target) string {
	if c, ok := t.(clockless); ok {
		return c.noClock()
	}
	return ""
}

func needProxies(t target) string {
	if len(t.base().proxies) == 0 {
		return "clients cannot be put behind a proxy in this configuration"
	}
	return ""
}

func needMembers(n int) func(target) string {
	return func(t target) string {
		if have := len(t.base().proxies); have < n {
			return fmt.Sprintf("needs %d members behind proxies, the configuration has %d", n, have)
		}
		return ""
	}
}

// faults are the faults, by name.
func faults() map[string]fault {
	list := []fault{
		holderFault("holder-pause", "the lock holder's process stopped (SIGSTOP) for 2.5 TTLs (at least a TTL + 2 s), then resumed",
			func(p *workers, w *worker) (func() error, error) {
				if err := p.signal(w, syscall.SIGSTOP); err != nil {
					return nil, err
				}
				return func() error { return p.signal(w, syscall.SIGCONT) }, nil
			},
			holderPause),
		holderFault("holder-kill", "the lock holder's process killed (SIGKILL) mid-section; a new worker replaces it",
			func(p *workers, w *worker) (func() error, error) { return nil, p.kill(w) },
			func(time.Duration) time.Duration { return 0 }),
		// The same two with lock-delay: a resource that cannot check
		// tokens (the control register) is kept from the next holder
		// until the failed holder's writes have landed.
		delayed(holderFault("holder-pause-delayed", "holder-pause with a lock delay (turnstile.WithLockDelay) longer than the pause by 2 s",
			func(p *workers, w *worker) (func() error, error) {
				if err := p.signal(w, syscall.SIGSTOP); err != nil {
					return nil, err
				}
				return func() error { return p.signal(w, syscall.SIGCONT) }, nil
			}, holderPause)),
		delayed(holderFault("holder-kill-delayed", "holder-kill with the same lock delay",
			func(p *workers, w *worker) (func() error, error) { return nil, p.kill(w) },
			func(time.Duration) time.Duration { return 0 })),
		{
			name: "member-pause", desc: "a server (the primary or leader) stopped (SIGSTOP) for 2 TTLs, then resumed",
			long:    true,
			applies: always,
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				m := env.primary()
				if err := m.ctl.Pause(); err != nil {
					return nil, err
				}
				return m.ctl.Resume, nil
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		memberCrash("member-kill", "a server (the primary or leader) killed (SIGKILL), restarted a TTL later (with its data where the store persists it)",
			func(ttl time.Duration) time.Duration { return ttl }),
		// A crash shorter than the leases on the server, where what it
		// keeps across a restart decides whether its locks outlive it.
		memberCrash("member-restart", "a server (the primary or leader) killed (SIGKILL) and restarted at once, within a lease (with its data where the store persists it)",
			func(time.Duration) time.Duration { return 0 }),
		clockJump("clock-forward", "a server's (the primary's or leader's) wall clock jumps 60 s ahead for 2 TTLs, then back (libfaketime)", time.Minute),
		clockJump("clock-back", "a server's (the primary's or leader's) wall clock jumps 60 s back for 2 TTLs, then forward again (libfaketime)", -time.Minute),
		{
			name: "failover", desc: "the replica stopped, a lock granted on the primary, the primary killed before the grant replicates, the replica resumed and promoted; the old primary restarted a TTL later as a replica",
			applies: func(t target) string {
				if _, ok := t.(failoverer); !ok {
					return "the configuration has no replicas to fail over to"
				}
				return ""
			},
			inject: failover,
			// The long hold must outlast the failover: the Sentinels
			// notice a dead primary after a second and then elect.
			length: func(ttl time.Duration) time.Duration { return max(5*ttl, 10*time.Second) },
		},
		{
			name: "slot-migration", desc: "the hash slot of the lock key migrated to another primary (MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE) while a holder holds the lock",
			long: true,
			applies: func(t target) string {
				if _, ok := t.(slotMigrator); !ok {
					return "only a Redis Cluster has slots"
				}
				return ""
			},
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				m, ok := env.t.(slotMigrator)
				if !ok {
					return nil, errors.New("only a Redis Cluster has slots")
				}
				return nil, m.migrateSlot(env.pool.key)
			},
			length: func(time.Duration) time.Duration { return 0 },
		},
		network("latency", "150 ms added each way between the clients and every server, for 2 TTLs",
			`"type":"latency","attributes":{"latency":150,"jitter":50}`, 2),
		network("blackhole", "everything between the clients and every server dropped for 2 TTLs (connections stay open)", blackhole, 2),
		network("reset", "every connection between the clients and the servers reset (TCP RST) for a TTL",
			`"type":"reset_peer","attributes":{"timeout":0}`, 1),
		partition("partition-minority", "a minority", func(n int) int { return (n - 1) / 2 }),
		partition("partition-majority", "a majority", func(n int) int { return n/2 + 1 }),
		memberPartition(),
	}
	m := make(map[string]fault, len(list))
	for _, f := range list {
		m[f.name] = f
	}
	return m
}

// blackhole is the toxic that drops everything and keeps connections open.
const blackhole = `"type":"timeout","attributes":{"timeout":0}`

// network adds the toxic spec between the clients and every server for
// ttls TTLs.
func network(name, desc, spec string, ttls time.Duration) fault {
	return fault{
		name: name, desc: desc,
		long:    true,
		applies: needProxies,
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			return toxics(env.proxies(), spec)
		},
		length: func(ttl time.Duration) time.Duration { return ttls * ttl },
	}
}

// partition cuts the clients off from cut(n) of a configuration's n
// members (the first ones) for 2 TTLs.
func partition(name, share string, cut func(n int) int) fault {
	return fault{
		name: name, desc: "the clients cut off from " + share + " of the members for 2 TTLs",
		long:    true,
		applies: needMembers(3),
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			ps := env.proxies()
			return toxics(ps[:cut(len(ps))], blackhole)
		},
		length: func(ttl time.Duration) time.Duration { return 2 * ttl },
	}
}

// memberPartition cuts the member a member fault hits (the primary or
// leader) off from every other member of its configuration, both ways,
// while every client still reaches every member: the partition after
// which the others may elect or promote another one while the old one
// still serves its clients. It lasts 2 TTLs, and at least 6 s: long
// enough for Sentinels to fail over (a second to call the primary down,
// then their vote and the promotion).
func memberPartition() fault {
	return fault{
		name: "member-partition", desc: "a server (the primary or leader) cut off from every other member, both ways, for 2 TTLs (at least 6 s); the clients still reach every member",
		long: true,
		applies: func(t target) string {
			if _, ok := t.(isolator); ok {
				return ""
			}
			if u, ok := t.(unisolable); ok {
				return u.noIsolate()
			}
			return "no member-to-member traffic to cut: one server, or servers that never talk to each other"
		},
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			i, ok := env.t.(isolator)
			if !ok {
				return nil, errors.New("the configuration cannot cut its members apart")
			}
			return i.isolate(env.t.primary(env.pool.key))
		},
		length: func(ttl time.Duration) time.Duration { return max(2*ttl, 6*time.Second) },
	}
}

// holderPause is how long holder-pause stops the holder: long enough for
// the lease to run out and another worker to be granted the lock, on a
// busy machine too.
func holderPause(ttl time.Duration) time.Duration { return max(5*ttl/2, ttl+2*time.Second) }

// delayed gives f a lock delay 2 s longer than holder-pause: a paused
// holder resumes, and writes, while its lock still stands in the store.
// A store that holds locks by session rather than by TTL (ZooKeeper)
// cannot keep a lock past its holder, and refuses the delay.
func delayed(f fault) fault {
	f.lockDelay = func(ttl time.Duration) time.Duration { return holderPause(ttl) + 2*time.Second }
	f.applies = func(t target) string {
		if _, ok := t.(*zkEnsemble); ok {
			return "a ZooKeeper lock is its holder's session, which cannot outlive the holder: lock-delay is refused"
		}
		return ""
	}
	return f
}

// faultOrder is the order of faults in the table and in --all.
var faultOrder = []string{"holder-pause", "holder-kill", "holder-pause-delayed", "holder-kill-delayed", "member-pause", "member-kill", "member-restart", "clock-forward", "clock-back",
	"failover", "slot-migration", "latency", "blackhole", "reset", "partition-minority", "partition-majority",
	"member-partition"}

// toxics adds one toxic to both directions of every proxy in ps and
// returns the function that removes them again.
func toxics(ps []*toxiproxy.Proxy, spec string) (func() error, error) {
	heal := func() error {
		for _, p := range ps {
			p.Toxics.ResetToxics(context.Background())
		}
		return nil
	}
	for _, p := range ps {
		for _, stream := range []string{"upstream", "downstream"} {
			js := `{"name":"chaos-` + stream + `","stream":"` + stream + `",` + spec + `}`
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				_ = heal()
				return nil, fmt.Errorf("toxic on %s: %w", p.Name, err)
			}
		}
	}
	return heal, nil
}

// holderFault acts on a worker in a long hold, between its reads and its
// writes of the registers.
func holderFault(name, desc string, act func(p *workers, w *worker) (heal func() error, err error), length func(ttl time.Duration) time.Duration) fault {
	return fault{
		name: name, desc: desc,
		long:    true,
		applies: always,
		inject: func(ctx context.Context, env *faultEnv) (func() error, error) {
			w, err := env.pool.inSection(ctx, "long", 10*env.ttl)
			if err != nil {
				return nil, err
			}
			return act(env.pool, w)
		},
		length: length,
	}
}

// memberCrash crashes the primary and restarts it when length has passed.
func memberCrash(name, desc string, length func(ttl time.Duration) time.Duration) fault {
	return fault{
		name: name, desc: desc,
		long:    true,
		applies: always,
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			m := env.primary()
			if err := crashMember(m); err != nil {
				return nil, err
			}
			return env.restart(m), nil
		},
		length: length,
	}
}

// clockJump moves the primary's wall clock by d for 2 TTLs, then puts it
// back.
func clockJump(name, desc string, d time.Duration) fault {
	return fault{
		name: name, desc: desc,
		long:    true,
		applies: needClock,
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			clock := env.primary().clock
			if err := clock.Jump(d); err != nil {
				return nil, err
			}
			return func() error { return clock.Set(0) }, nil
		},
		length: func(ttl time.Duration) time.Duration { return 2 * ttl },
	}
}
