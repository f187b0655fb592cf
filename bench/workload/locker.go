package workload

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/turnstilelock/turnstile"

	tsredis "github.com/turnstilelock/turnstile/redis" // registers redis://
	_ "github.com/turnstilelock/turnstile/redlock"     // registers redlock://
)

// ErrUsage reports a workload, cell or library setting that cannot run.
var ErrUsage = errors.New("workload: invalid setting")

// A Locker takes locks for a cell's workers. It is safe for concurrent
// use.
type Locker interface {
	// Acquire takes the lock on key, waiting while another owner holds
	// it, until it is taken or ctx is done.
	Acquire(ctx context.Context, key string) (Held, error)
	// Close releases the Locker's connections.
	Close() error
}

// Held is a lock taken by Acquire.
type Held interface {
	// Release frees the lock.
	Release(ctx context.Context) error
}

// Library opens Lockers of one lock library.
type Library struct {
	// Name identifies the library in results ("turnstile", "redsync", ...).
	Name string
	// Open connects a Locker to the Redis servers at addrs (host:port):
	// one for single-node workloads, several for Redlock. concurrency is
	// how many workers will share it, for libraries whose connection
	// pool must be sized.
	Open func(ctx context.Context, addrs []string, concurrency int) (Locker, error)
	// MultiNode reports whether the library can run Redlock workloads
	// (Nodes > 1).
	MultiNode bool
	// OpenCluster connects a Locker to the Redis Cluster whose masters
	// are addrs; nil for a library that does not run on a cluster.
	OpenCluster func(ctx context.Context, addrs []string, concurrency int) (Locker, error)
	// Settings says, in a line for the report, what the library is
	// given: its TTL, how it waits for a held lock, what is left at its
	// defaults.
	Settings string
}

// TTL is the lock TTL every library is given where it takes one
// (turnstile, redsync, redislock): redsync's default, long enough that
// no lock is renewed within a cell.
const TTL = 8 * time.Second

// DefaultBackoff is turnstile's default wait between attempts on a held
// key, full jitter over an exponential ceiling from
// turnstile.DefaultBackoffBase (10 ms) to turnstile.DefaultBackoffCap
// (1 s), without the default's retry limit: Acquire waits until its
// context ends, as the peers do. Release notices and the Client's local
// line of waiters wake a waiter before the backoff does.
var DefaultBackoff = turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1}

// Backoff is a short wait between attempts on a held key: full jitter
// over an exponential ceiling from 1 ms to 8 ms, without a retry limit
// (the cell's context ends the wait). OpenTurnstile and the
// TurnstileSharedBackoff row use it.
var Backoff = turnstile.Exponential{Base: time.Millisecond, Cap: 8 * time.Millisecond, MaxRetries: -1}

// Turnstile is turnstile as its users run it: opened by URL on a
// redis-server (one address) or a Redlock of independent servers
// (several addresses, restart quarantine off: the benchmark's servers
// have just been started and hold no lock anyone could lose), with
// turnstile's defaults — release notices, a local line of waiters per
// key and Client, the watchdog — except the lock TTL (TTL) and the
// retry limit (DefaultBackoff has none).
func Turnstile() Library {
	return turnstileLibrary("turnstile",
		fmt.Sprintf("turnstile: its defaults (release notices, one local line of waiters per key, the backoff's timer as a safety net) with TTL %v and backoff %v…%v (full jitter) without a retry limit", TTL, DefaultBackoff.Base, DefaultBackoff.Cap),
		turnstile.WithBackoff(DefaultBackoff))
}

// TurnstileSharedBackoff is Turnstile with the short Backoff (1 ms …
// 8 ms) instead of DefaultBackoff: a variant of turnstile that shows how
// much of a cell's figures the backoff decides. Release notices and
// local lines should make the backoff a safety net only, so that the
// two rows differ little.
func TurnstileSharedBackoff() Library {
	return turnstileLibrary("turnstile-shared-backoff",
		fmt.Sprintf("turnstile-shared-backoff: the same with backoff %v…%v (full jitter), a variant, no peer", Backoff.Base, Backoff.Cap))
}

// TurnstileGoRedis is Turnstile on one redis-server over a go-redis v9
// client (redis.NewGoRedis) instead of rueidis: a variant, no peer, that
// sets turnstile's own cost apart from its client library's. The pool
// holds a connection per worker, as the peers' do; go-redis sends each
// command on the caller's goroutine over a connection of the pool,
// without pipelining concurrent callers.
func TurnstileGoRedis() Library {
	return Library{
		Name:     "turnstile-goredis",
		Settings: "turnstile-goredis: turnstile as above over a go-redis v9 client (a pool of a connection per worker, at least 10 per CPU), a variant, no peer; one server only",
		Open: func(ctx context.Context, addrs []string, concurrency int) (Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: turnstile-goredis takes one address, not %d", ErrUsage, len(addrs))
			}
			gc := goredis.NewClient(&goredis.Options{Addr: addrs[0], PoolSize: max(10*runtime.GOMAXPROCS(0), concurrency)})
			b, err := tsredis.NewGoRedis(gc)
			if err != nil {
				_ = gc.Close()
				return nil, err
			}
			c, err := turnstile.New(b, turnstile.WithTTL(TTL), turnstile.WithBackoff(DefaultBackoff))
			if err != nil {
				_ = gc.Close()
				return nil, err
			}
			return goredisTurnstile{turnstileLocker{c}, gc}, nil
		},
	}
}

// goredisTurnstile closes the go-redis client its Backend does not own.
type goredisTurnstile struct {
	turnstileLocker
	gc *goredis.Client
}

func (g goredisTurnstile) Close() error {
	err := g.turnstileLocker.Close()
	_ = g.gc.Close()
	return err
}

func turnstileLibrary(name, settings string, opts ...turnstile.Option) Library {
	return Library{
		Name:      name,
		MultiNode: true,
		Settings:  settings,
		Open: func(ctx context.Context, addrs []string, _ int) (Locker, error) {
			switch len(addrs) {
			case 0:
				return nil, fmt.Errorf("%w: no redis address", ErrUsage)
			case 1:
				return OpenTurnstile(ctx, "redis://"+addrs[0], opts...)
			}
			return OpenTurnstile(ctx, "redlock://"+strings.Join(addrs, ",")+"?quarantine=0", opts...)
		},
		// Several hosts in a redis:// URL are the seeds of a cluster.
		OpenCluster: func(ctx context.Context, addrs []string, _ int) (Locker, error) {
			if len(addrs) == 0 {
				return nil, fmt.Errorf("%w: no redis address", ErrUsage)
			}
			return OpenTurnstile(ctx, "redis://"+strings.Join(addrs, ","), opts...)
		},
	}
}

// OpenTurnstile opens a turnstile client on url (any scheme registered
// with turnstile.Open; this package registers redis:// and redlock://)
// with TTL, Backoff and then opts, which may replace either, as a
// Locker.
func OpenTurnstile(ctx context.Context, url string, opts ...turnstile.Option) (Locker, error) {
	opts = append([]turnstile.Option{turnstile.WithTTL(TTL), turnstile.WithBackoff(Backoff)}, opts...)
	c, err := turnstile.Open(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("workload: open turnstile: %w", err)
	}
	return turnstileLocker{c}, nil
}

type turnstileLocker struct{ c *turnstile.Client }

func (t turnstileLocker) Acquire(ctx context.Context, key string) (Held, error) {
	l, err := t.c.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (t turnstileLocker) Close() error { return t.c.Close() }
