// Package peers adapts the Go Redis lock libraries turnstile is compared
// with to workload.Locker: go-redsync/redsync over go-redis v9 pools,
// bsm/redislock over go-redis v9, and rueidis's rueidislock. Each gets
// the settings a user of it would choose for the same job: the same lock
// TTL (workload.TTL) where it takes one, and for those that retry by
// polling, the same wait between attempts (workload.Backoff) and no
// retry limit, so that every library blocks until the cell's context
// ends. rueidislock runs with its defaults (it waits for key-space
// notifications instead of polling).
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

// All is every peer library.
func All() []workload.Library { return []workload.Library{Redsync(), Redislock(), Rueidislock()} }

// poolSize is the go-redis pool for concurrency workers: its default (ten
// connections per CPU), or one per worker where there are more workers,
// so that no worker waits for a connection.
func poolSize(concurrency int) int { return max(10*runtime.GOMAXPROCS(0), concurrency) }

// Redsync is go-redsync/redsync v4 with one go-redis v9 client per node
// (quorum of a majority on several nodes).
func Redsync() workload.Library {
	return workload.Library{
		Name:      "redsync",
		MultiNode: true,
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
			l.opts = []redsync.Option{
				redsync.WithExpiry(workload.TTL),
				redsync.WithTries(math.MaxInt32),
				redsync.WithRetryDelayFunc(func(tries int) time.Duration {
					d, _ := workload.Backoff.Delay(tries - 1)
					return d
				}),
			}
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

// Redislock is bsm/redislock over a go-redis v9 client, retrying with
// workload.Backoff.
func Redislock() workload.Library {
	return workload.Library{
		Name: "redislock",
		Open: func(_ context.Context, addrs []string, concurrency int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: redislock runs on one server, got %d addresses", workload.ErrUsage, len(addrs))
			}
			c := goredis.NewClient(&goredis.Options{Addr: addrs[0], PoolSize: poolSize(concurrency)})
			return &redislockLocker{c: c, rl: redislock.New(c)}, nil
		},
	}
}

type redislockLocker struct {
	c  *goredis.Client
	rl *redislock.Client
}

// jitter is redislock.RetryStrategy with workload.Backoff's waits.
type jitter struct{ attempt int }

func (j *jitter) NextBackoff() time.Duration {
	d, _ := workload.Backoff.Delay(j.attempt)
	j.attempt++
	return max(d, time.Microsecond) // 0 would end the retries
}

func (l *redislockLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	lock, err := l.rl.Obtain(ctx, key, workload.TTL, &redislock.Options{RetryStrategy: &jitter{}})
	if err != nil {
		return nil, err
	}
	return lock, nil
}

func (l *redislockLocker) Close() error { return l.c.Close() }

// Rueidislock is rueidis's rueidislock with its defaults (a majority of
// three keys per lock, 5 s validity, client-side caching to learn of
// releases).
func Rueidislock() workload.Library {
	return workload.Library{
		Name: "rueidislock",
		Open: func(_ context.Context, addrs []string, _ int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: rueidislock runs on one server, got %d addresses", workload.ErrUsage, len(addrs))
			}
			lk, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: rueidis.ClientOption{InitAddress: addrs}})
			if err != nil {
				return nil, fmt.Errorf("rueidislock: %w", err)
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
