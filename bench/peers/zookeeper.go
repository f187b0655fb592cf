package peers

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// ZooKeeperLock is go-zookeeper's lock recipe, zk.NewLock, as its users
// run it: one zk.Conn (a ZooKeeper session of workload.TTL) per worker,
// a zk.Lock per lock on the node /zk-lock/<key> with the open ACL. Lock
// creates an ephemeral sequential child of that node (creating the node
// first when it is missing), lists the children and, unless its child is
// the lowest, waits on a watch of the one just below it; Unlock deletes
// the child. The key's node stays behind, as the recipe leaves it.
//
// zk.Lock takes no context: a waiter still queued when a cell ends waits
// for its turn, which comes as the workers ahead of it release.
func ZooKeeperLock() workload.Library {
	return workload.Library{
		Name:     "zk-lock",
		Settings: fmt.Sprintf("zk-lock: go-zookeeper's zk.NewLock recipe, one zk.Conn (session timeout %v) per worker", workload.TTL),
		Open: func(ctx context.Context, addrs []string, workers int) (workload.Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: zk-lock takes one server, not %d", workload.ErrUsage, len(addrs))
			}
			return openZKLock(ctx, addrs[0], workers)
		},
	}
}

func openZKLock(ctx context.Context, addr string, workers int) (*zkLocker, error) {
	l := &zkLocker{free: make(chan *zk.Conn, max(workers, 1))}
	for range max(workers, 1) {
		c, events, err := zk.Connect([]string{addr}, workload.TTL, zk.WithLogger(quiet{}))
		if err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("zk-lock: %w", err)
		}
		l.conns = append(l.conns, c)
		if err := awaitSession(ctx, events); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("zk-lock: %w", err)
		}
		l.free <- c
	}
	return l, nil
}

// awaitSession waits until the server grants the connection's session.
func awaitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return zk.ErrClosing
			}
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// zkLocker lends each worker a connection of its own: a worker holds one
// lock at a time, so a pool of one connection per worker is a
// connection per worker.
type zkLocker struct {
	conns []*zk.Conn
	free  chan *zk.Conn
}

func (l *zkLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	var c *zk.Conn
	select {
	case c = <-l.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m := zk.NewLock(c, "/zk-lock/"+key, zk.WorldACL(zk.PermAll))
	if err := m.Lock(); err != nil {
		l.free <- c
		return nil, err
	}
	return &zkHeld{l: l, c: c, m: m}, nil
}

func (l *zkLocker) Close() error {
	for _, c := range l.conns {
		c.Close()
	}
	return nil
}

type zkHeld struct {
	l *zkLocker
	c *zk.Conn
	m *zk.Lock
}

func (h *zkHeld) Release(context.Context) error {
	defer func() { h.l.free <- h.c }()
	if err := h.m.Unlock(); err != nil {
		return errors.Join(ErrNotHeld, err)
	}
	return nil
}

// quiet drops go-zookeeper's log lines (connections, sessions), which
// would interleave with the benchmark's progress.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
