package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Nodes left behind. A lock node belongs to the session, not to the
// request that created it: when a delete cannot reach the server (the
// connection dropped with the request in flight, or Release found the
// client disconnected), the node lives on for as long as the session
// does — and a client that reconnects in time keeps its session, so the
// lock would stay held until the process exits, with every contender
// queued behind it. The Backend therefore remembers what it failed to
// delete and deletes it as soon as it has a session again (or the
// session expired, which deleted it already).

// doomed is a node to delete: path, or every node of an owner in a
// queue (dir plus the owner's escaped name), for a node whose path the
// Backend does not know.
type doomed struct {
	path       string
	dir, owner string
}

// doom remembers d for deletion, with done to run once it is gone, and
// wakes the reaper.
func (b *Backend) doom(d doomed, done func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return // closing the session deletes every node it holds
	}
	if prev, ok := b.doomed[d]; ok && prev != nil && done != nil {
		done = func() { prev(); done() }
	} else if ok && done == nil {
		done = prev
	}
	b.doomed[d] = done
	b.mu.Unlock()
	b.kickReaper()
}

func (b *Backend) kickReaper() {
	select {
	case b.reapKick <- struct{}{}:
	default:
	}
}

// deleteOrDoom deletes the node at p, and dooms it when the server could
// not be told (an answer of ZooKeeper's, such as no node, is final).
func (b *Backend) deleteOrDoom(ctx context.Context, p string, version int32) error {
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, b.conn.Delete(p, version) })
	if err != nil && !final(err) {
		b.doom(doomed{path: p}, nil)
	}
	return err
}

// releaseNode deletes a held node at p, as deleteOrDoom does, and reports
// whether it was there; what names the step in the error.
func (b *Backend) releaseNode(ctx context.Context, p, what string) (bool, error) {
	err := b.deleteOrDoom(ctx, p, -1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	default:
		return false, fmt.Errorf("zookeeper: %s %s: %w", what, p, err)
	}
}

// stat reads the node at p, with zk.ErrNoNode when there is none.
func (b *Backend) stat(ctx context.Context, p string) (*zk.Stat, error) {
	return call(ctx, func() (*zk.Stat, error) {
		ok, st, err := b.conn.Exists(p)
		if err == nil && !ok {
			err = zk.ErrNoNode
		}
		return st, err
	})
}

// final reports whether err is ZooKeeper's answer to a request, rather
// than a request that may not have reached it.
func final(err error) bool {
	switch {
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrSessionMoved),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrSuspended):
		return false
	}
	return true
}

// reapRetry is how soon the reaper tries again after a pass that left
// nodes behind although the client had a session.
const reapRetry = time.Second

// reap deletes the doomed nodes whenever the client has a session: when
// one is doomed, when a session is (re)established, and every reapRetry
// while some are left. It ends when the Backend closes.
func (b *Backend) reap() {
	defer b.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-b.reapStop:
			return
		case <-b.reapKick:
		case <-retry.C:
		}
		if b.live() != nil {
			continue // the next session wakes the reaper
		}
		if left := b.reapOnce(); left > 0 {
			retry.Reset(reapRetry)
		}
	}
}

// reapOnce tries to delete every doomed node and returns how many are
// left.
func (b *Backend) reapOnce() int {
	b.mu.Lock()
	pending := make([]doomed, 0, len(b.doomed))
	for d := range b.doomed {
		pending = append(pending, d)
	}
	b.mu.Unlock()
	left := 0
	for _, d := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		err := b.reapOne(ctx, d)
		cancel()
		if err != nil {
			left++
			if b.logger != nil {
				b.logger.Debug("zookeeper: delete a node left behind, will try again", "node", d.path+d.dir, "err", err)
			}
			continue
		}
		b.mu.Lock()
		done, ok := b.doomed[d]
		delete(b.doomed, d)
		b.mu.Unlock()
		if ok && done != nil {
			done()
		}
	}
	return left
}

// reapOne deletes d's node or nodes; gone already is done.
func (b *Backend) reapOne(ctx context.Context, d doomed) error {
	if d.path != "" {
		_, err := call(ctx, func() (struct{}, error) { return struct{}{}, b.conn.Delete(d.path, -1) })
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	}
	q, err := b.listDir(ctx, d.dir)
	if err != nil {
		return err
	}
	for _, n := range q {
		if n.owner != d.owner {
			continue
		}
		_, err := call(ctx, func() (struct{}, error) { return struct{}{}, b.conn.Delete(d.dir+"/"+n.name, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}
