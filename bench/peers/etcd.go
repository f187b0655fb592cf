package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// EtcdMutex is etcd's own lock recipe, concurrency.Mutex, as its users
// run it: one clientv3 client per Locker and one concurrency.Session per
// worker (a lease of workload.TTL, granted once and kept alive by the
// session), a Mutex per lock on the key's prefix. Lock waits in the
// Mutex's queue until the keys ahead of it are deleted.
func EtcdMutex() workload.Library {
	return workload.Library{
		Name:     "etcd-mutex",
		Settings: fmt.Sprintf("etcd-mutex: etcd's concurrency.Mutex, one concurrency.Session (lease TTL %v) per worker, one client per cell", workload.TTL),
		Open: func(ctx context.Context, addrs []string, concurrency int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: etcd-mutex takes one endpoint, not %d", workload.ErrUsage, len(addrs))
			}
			return openEtcdMutex(ctx, addrs[0], concurrency)
		},
	}
}

func openEtcdMutex(ctx context.Context, addr string, workers int) (*etcdMutexLocker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("etcd-mutex: %w", err)
	}
	l := &etcdMutexLocker{cli: cli, free: make(chan *concurrency.Session, workers)}
	for range workers {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(workload.TTL/time.Second)), concurrency.WithContext(ctx))
		if err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("etcd-mutex: session: %w", err)
		}
		l.sessions = append(l.sessions, s)
		l.free <- s
	}
	return l, nil
}

// etcdMutexLocker lends each worker a session of its own: a worker holds
// one lock at a time, so a pool of one session per worker is a session
// per worker.
type etcdMutexLocker struct {
	cli      *clientv3.Client
	sessions []*concurrency.Session
	free     chan *concurrency.Session
}

func (l *etcdMutexLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	var s *concurrency.Session
	select {
	case s = <-l.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m := concurrency.NewMutex(s, "/etcd-mutex/"+key)
	if err := m.Lock(ctx); err != nil {
		l.free <- s
		return nil, err
	}
	return &etcdMutexHeld{l: l, s: s, m: m}, nil
}

func (l *etcdMutexLocker) Close() error {
	var errs []error
	for _, s := range l.sessions {
		errs = append(errs, s.Close())
	}
	errs = append(errs, l.cli.Close())
	return errors.Join(errs...)
}

type etcdMutexHeld struct {
	l *etcdMutexLocker
	s *concurrency.Session
	m *concurrency.Mutex
}

func (h *etcdMutexHeld) Release(ctx context.Context) error {
	defer func() { h.l.free <- h.s }()
	return h.m.Unlock(ctx)
}
