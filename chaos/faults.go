package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// faultEnv is what a fault acts on.
type faultEnv struct {
	t    *target
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
	applies func(t *target) string // "" or why the fault does not apply
	inject  func(ctx context.Context, env *faultEnv) (heal func() error, err error)
	length  func(ttl time.Duration) time.Duration // how long the fault lasts before it heals
	// long: inject while a holder is in a long hold between its reads and
	// its writes, one that outlasts the fault — the worst moment for a
	// fault that can lose the lock.
	long bool
}

func always(*target) string { return "" }

// primary is the member that member faults hit for the cell's key.
func (env *faultEnv) primary() *member { return env.t.members[env.t.primary(env.pool.key)] }

func needClock(t *target) string {
	if t.noClock != "" {
		return t.noClock
	}
	return ""
}

// crashMember crashes m: through its launcher for a redis-server (which
// must know the server is down; SIGKILL leaves its append-only file, if
// it keeps one, for the restart), else with crash, which leaves the data
// directory for the restart.
func crashMember(m *member) error {
	if s, ok := m.ctl.(*redisproc.Server); ok {
		s.Kill()
		return nil
	}
	return crash(m)
}

// restart brings a crashed member back. A Sentinel group's old primary
// comes back as a replica of the primary the Sentinels promoted, as a
// deployment that follows its Sentinels configures it; without that it
// would start as a second primary until the Sentinels notice.
func (env *faultEnv) restart(m *member) func() error {
	return func() error {
		if err := m.ctl.Restart(); err != nil {
			return err
		}
		s, ok := m.ctl.(*redisproc.Server)
		if env.t.sentinel == nil || !ok {
			return nil
		}
		addr, err := env.t.sentinel.PrimaryAddr()
		if err != nil || addr == env.t.sentinel.PeerAddr(s) {
			return err
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		if _, err = s.Do("REPLICAOF", host, port); err != nil {
			return err
		}
		// Into its configuration file, as the Sentinels do: a later
		// restart keeps the role.
		_, err = s.Do("CONFIG", "REWRITE")
		return err
	}
}

// clockJump moves clock by d and returns the function that puts it back.
func clockJump(clock *proc.Clock, d time.Duration) (func() error, error) {
	if err := clock.Jump(d); err != nil {
		return nil, err
	}
	return func() error { return clock.Set(0) }, nil
}

// failover reproduces a lost grant: the replica is stopped, so that a
// grant made now on the primary does not reach it; a worker takes the
// lock and holds it (a long hold, past the fault); the primary is killed
// and the replica resumed, and the Sentinels or the cluster promote it —
// without the grant, so another worker is granted the same lock. The heal
// restarts the old primary, which rejoins as a replica. With
// wait_replicas=1 the grant is refused while the replica is stopped, and
// the long holder never appears.
func failover(ctx context.Context, env *faultEnv) (func() error, error) {
	t := env.t
	old := env.primary()
	var replica proc.Member
	if t.sentinel != nil {
		for _, n := range t.sentinel.Nodes() {
			if proc.Member(n) != old.ctl {
				replica = n
			}
		}
	} else {
		owner, ok := old.ctl.(*redisproc.Server)
		if !ok {
			return nil, errors.New("the cluster's primary is no redis-server")
		}
		r, err := t.cluster.ReplicaOf(owner)
		if err != nil {
			return nil, err
		}
		replica = r
	}
	if replica == nil {
		return nil, errors.New("no replica to fail over to")
	}
	if err := replica.Pause(); err != nil {
		return nil, err
	}
	// Cut the stopped replica off, or it would find the grant in its
	// socket's buffer when it runs again.
	if s, ok := old.ctl.(*redisproc.Server); ok {
		if _, err := s.Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
			_ = replica.Resume()
			return nil, err
		}
	}
	// From here the primary's grants reach no replica, and after the
	// failover the new primary has none until the heal.
	env.cut = time.Now().UnixNano()
	// The grant the failover loses; with wait_replicas none is made.
	_, _ = env.pool.longHolder(ctx, 3*env.ttl)
	if err := crashMember(old); err != nil {
		_ = replica.Resume()
		return nil, err
	}
	if err := replica.Resume(); err != nil {
		return nil, err
	}
	if t.sentinel != nil {
		s, ok := old.ctl.(*redisproc.Server)
		if !ok {
			return nil, errors.New("the Sentinel group's primary is no redis-server")
		}
		if _, err := t.sentinel.WaitFailoverFrom(s.Addr(), time.Minute); err != nil {
			return nil, err
		}
	} else if err := t.cluster.WaitHealthy(time.Minute); err != nil {
		return nil, err
	}
	return env.restart(old), nil
}

func needProxies(t *target) string {
	if len(t.proxies) == 0 {
		return "clients cannot be put behind a proxy in this configuration"
	}
	return ""
}

func needMembers(n int) func(*target) string {
	return func(t *target) string {
		if len(t.proxies) < n {
			return fmt.Sprintf("needs %d members behind proxies, the configuration has %d", n, len(t.proxies))
		}
		return ""
	}
}

// faults are the faults, by name.
func faults() map[string]fault {
	list := []fault{
		{
			name: "holder-pause", desc: "the lock holder's process stopped (SIGSTOP) for 2.5 TTLs (at least a TTL + 2 s), then resumed",
			long:    true,
			applies: always,
			inject: func(ctx context.Context, env *faultEnv) (func() error, error) {
				w, err := env.pool.inSection(ctx, "long", 10*env.ttl)
				if err != nil {
					return nil, err
				}
				if err := env.pool.signal(w, syscall.SIGSTOP); err != nil {
					return nil, err
				}
				return func() error { return env.pool.signal(w, syscall.SIGCONT) }, nil
			},
			// Long enough for the lease to run out and another worker to be
			// granted the lock, on a busy machine too.
			length: func(ttl time.Duration) time.Duration { return max(5*ttl/2, ttl+2*time.Second) },
		},
		{
			name: "holder-kill", desc: "the lock holder's process killed (SIGKILL) mid-section; a new worker replaces it",
			long:    true,
			applies: always,
			inject: func(ctx context.Context, env *faultEnv) (func() error, error) {
				w, err := env.pool.inSection(ctx, "long", 10*env.ttl)
				if err != nil {
					return nil, err
				}
				return nil, env.pool.kill(w)
			},
			length: func(time.Duration) time.Duration { return 0 },
		},
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
		{
			name: "clock-forward", desc: "a server's (the primary's or leader's) wall clock jumps 60 s ahead for 2 TTLs, then back (libfaketime)",
			long:    true,
			applies: needClock,
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				return clockJump(env.primary().clock, time.Minute)
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		{
			name: "clock-back", desc: "a server's (the primary's or leader's) wall clock jumps 60 s back for 2 TTLs, then forward again (libfaketime)",
			long:    true,
			applies: needClock,
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				return clockJump(env.primary().clock, -time.Minute)
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		{
			name: "failover", desc: "the replica stopped, a lock granted on the primary, the primary killed before the grant replicates, the replica resumed and promoted; the old primary restarted a TTL later as a replica",
			applies: func(t *target) string {
				if t.sentinel == nil && t.cluster == nil {
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
			applies: func(t *target) string {
				if t.cluster == nil {
					return "only a Redis Cluster has slots"
				}
				return ""
			},
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				c := env.t.cluster
				slot := clusterslot.Of("{" + env.pool.key + "}")
				from, err := c.Owner(slot)
				if err != nil {
					return nil, err
				}
				primaries, err := c.Primaries()
				if err != nil {
					return nil, err
				}
				for _, p := range primaries {
					if p != from {
						return nil, c.MigrateSlot(slot, p)
					}
				}
				return nil, errors.New("no other primary to migrate the slot to")
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
			return toxics(env.t.proxies, spec)
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
			return toxics(env.t.proxies[:cut(len(env.t.proxies))], blackhole)
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
		applies: func(t *target) string {
			switch {
			case t.isolate != nil:
				return ""
			case t.noIsolate != "":
				return t.noIsolate
			}
			return "no member-to-member traffic to cut: one server, or servers that never talk to each other"
		},
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			return env.t.isolate(env.t.primary(env.pool.key))
		},
		length: func(ttl time.Duration) time.Duration { return max(2*ttl, 6*time.Second) },
	}
}

// faultOrder is the order of faults in the table and in --all.
var faultOrder = []string{"holder-pause", "holder-kill", "member-pause", "member-kill", "member-restart", "clock-forward", "clock-back",
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
