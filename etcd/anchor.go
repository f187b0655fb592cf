package etcd

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The waiters' watch stream stays open between waits. clientv3 runs the
// watches of a client (those with the same gRPC metadata) on one
// stream, opens it for the first watch and closes it after the last, and
// each open logs in again (see renew.go): waits that do not overlap
// would log in once each. From its first wait on, the backend keeps a
// watch of its own on that stream, which reports nothing, until Close —
// or until etcd ends it (a lost leader ends a stream of watches that
// require one; a user without read access is refused), after which the
// next wait starts it again, so that a failure costs one login per wait
// at most, as it did before.

// anchorState is where the backend's own watch is.
type anchorState int

const (
	anchorIdle     anchorState = iota // no watch: none started yet, or etcd ended it
	anchorWatching                    // the watch is open
	anchorClosed                      // Close: no more watches
)

// anchor is the backend's own watch that holds the waiters' watch
// stream open.
type anchor struct {
	mu     sync.Mutex
	state  anchorState
	cancel context.CancelFunc // ends the open watch
	wg     sync.WaitGroup
}

// hold opens the backend's watch unless it is open. It opens it before
// the waiter's own, so that both share the stream.
func (a *anchor) hold(b *Backend) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != anchorIdle {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The waiters' watches require a leader (waitFor): the same metadata
	// puts this one on their stream. Filtering out puts and deletes
	// leaves etcd nothing to send on it.
	wch := b.cli.Watch(clientv3.WithRequireLeader(ctx), b.cfg.prefix+"locks/",
		clientv3.WithFilterPut(), clientv3.WithFilterDelete())
	a.state, a.cancel = anchorWatching, cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for range wch {
			// Nothing but the channel's close (or an error before it).
		}
		cancel()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.state == anchorWatching {
			a.state = anchorIdle
		}
	}()
}

// close ends the backend's watch and waits until it has ended.
func (a *anchor) close() {
	a.mu.Lock()
	if a.state == anchorWatching {
		a.cancel()
	}
	a.state = anchorClosed
	a.mu.Unlock()
	a.wg.Wait()
}
