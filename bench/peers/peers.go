// Package peers adapts the Go Redis lock libraries turnstile is compared
// with to workload.Locker, each set up as its users run it, with the
// lock TTL workload.TTL (8 s) where it takes one:
//
//   - go-redsync/redsync v4 over go-redis v9 pools (a majority quorum on
//     several nodes): its default wait between attempts, a random
//     50 … 250 ms, and unlimited tries (math.MaxInt32), so that it
//     blocks until the cell's context ends;
//   - bsm/redislock over go-redis v9, retrying every millisecond
//     (redislock.LinearBackoff) until the context ends;
//   - rueidis's rueidislock with its defaults: a lock is a majority of
//     three keys, valid 5 s and extended while held, and a waiter
//     learns of a release from client-side caching invalidations
//     instead of polling; and the same with KeyMajority 1, one key per
//     lock ("rueidislock-km1").
//
// Every go-redis pool holds a connection per worker where there are more
// workers than its default size.
//
// It also holds the other stores' own lock recipes, as their users run
// them, for bench --store: etcd's concurrency.Mutex (EtcdMutex),
// PostgreSQL's pg_advisory_lock on a pgxpool pool (PostgresAdvisory),
// MySQL's GET_LOCK on a database/sql pool (MySQLGetLock) and
// go-zookeeper's zk.NewLock (ZooKeeperLock), each with a connection or
// session per worker.
package peers

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
	"github.com/turnstilelock/turnstile/bench/workload"
)

// All is every peer library: redsync, redislock, rueidislock and
// rueidislock-km1.
func All() []workload.Library {
	return []workload.Library{Redsync(), Redislock(), Rueidislock(), RueidislockKeyMajority1()}
}

// poolSize is the go-redis pool for concurrency workers: its default (ten
// connections per CPU), or one per worker where there are more workers,
// so that no worker waits for a connection.
func poolSize(concurrency int) int { return max(10*runtime.GOMAXPROCS(0), concurrency) }

// Redsync is go-redsync/redsync v4 with one go-redis v9 client per node
// (quorum of a majority on several nodes), expiry workload.TTL, its
// default retry delay (random, 50 … 250 ms) and unlimited tries.
func Redsync() workload.Library {
	return workload.Library{
		Name:      "redsync",
		MultiNode: true,
		Settings:  fmt.Sprintf("redsync: expiry %v, its default retry delay (random 50…250ms), unlimited tries", workload.TTL),
		Open: func(_ context.Context, addrs []string, concurrency int) (workload.Locker, error) {
			if len(addrs) == 0 {
				return nil, fmt.Errorf("%w: redsync without an address", workload.ErrUsage)
			}
			l := &redsyncLocker{}
			pools := make([]redsyncredis.Pool, 0, len(addrs))
			for _, a := range addrs {
				c := goredis.NewClient(&goredis.Options{Addr: a, PoolSize: poolSize(concurrency)})
				l.clients = append(l.clients, c)
				pools = append(pools, redsyncgoredis.NewPool(c))
			}
			l.rs = redsync.New(pools...)
			l.opts = []redsync.Option{redsync.WithExpiry(workload.TTL), redsync.WithTries(math.MaxInt32)}
			return l, nil
		},
	}
}

type redsyncLocker struct {
	rs      *redsync.Redsync
	opts    []redsync.Option
	clients []*goredis.Client
}

func (l *redsyncLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	m := l.rs.NewMutex(key, l.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (l *redsyncLocker) Close() error {
	for _, c := range l.clients {
		_ = c.Close()
	}
	return nil
}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("redsync: %s was not held", h.m.Name())
	}
	return err
}

// Redislock is bsm/redislock over a go-redis v9 client, with TTL
// workload.TTL, retrying every RedislockRetry until the context ends.
func Redislock() workload.Library {
	return workload.Library{
		Name:     "redislock",
		Settings: fmt.Sprintf("redislock: TTL %v, retry every %v (LinearBackoff) until the context ends", workload.TTL, RedislockRetry),
		Open: func(_ context.Context, addrs []string, concurrency int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: redislock runs on one server, got %d addresses", workload.ErrUsage, len(addrs))
			}
			c := goredis.NewClient(&goredis.Options{Addr: addrs[0], PoolSize: poolSize(concurrency)})
			return &redislockLocker{c: c, rl: redislock.New(c), opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(RedislockRetry)}}, nil
		},
	}
}

// RedislockRetry is redislock's wait between attempts on a held key.
const RedislockRetry = time.Millisecond

type redislockLocker struct {
	c    *goredis.Client
	rl   *redislock.Client
	opts *redislock.Options // LinearBackoff holds no state: one for all calls
}

func (l *redislockLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	lock, err := l.rl.Obtain(ctx, key, workload.TTL, l.opts)
	if err != nil {
		return nil, err
	}
	return lock, nil
}

func (l *redislockLocker) Close() error { return l.c.Close() }

// Rueidislock is rueidis's rueidislock with its defaults: a majority of
// three keys per lock (KeyMajority 2), 5 s validity extended every
// 2.5 s while held, client-side caching to learn of releases.
func Rueidislock() workload.Library {
	return rueidislockLibrary("rueidislock", "rueidislock: its defaults (a majority of 3 keys per lock, validity 5s, waiters woken by client-side caching)", 0)
}

// RueidislockKeyMajority1 is Rueidislock with KeyMajority 1: one key
// per lock instead of a majority of three.
func RueidislockKeyMajority1() workload.Library {
	return rueidislockLibrary("rueidislock-km1", "rueidislock-km1: its defaults but KeyMajority 1 (one key per lock)", 1)
}

// rueidislockLibrary is rueidislock with its defaults and keyMajority (0:
// its default).
func rueidislockLibrary(name, settings string, keyMajority int32) workload.Library {
	return workload.Library{
		Name:     name,
		Settings: settings,
		Open: func(_ context.Context, addrs []string, _ int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: %s runs on one server, got %d addresses", workload.ErrUsage, name, len(addrs))
			}
			lk, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: rueidis.ClientOption{InitAddress: addrs}, KeyMajority: keyMajority})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			return rueidisLocker{lk}, nil
		},
	}
}

type rueidisLocker struct{ lk rueidislock.Locker }

func (l rueidisLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	_, cancel, err := l.lk.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return rueidisHeld(cancel), nil
}

func (l rueidisLocker) Close() error { l.lk.Close(); return nil }

type rueidisHeld context.CancelFunc

func (h rueidisHeld) Release(context.Context) error { h(); return nil }
