package zookeeper

import (
	"errors"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"
)

// holdKey names a lock by key and owner.
type holdKey struct{ key, owner string }

// hold is a lock this Backend took: its node and the timer that deletes
// the node when the TTL passes without an Extend.
type hold struct {
	path     string
	ttl      time.Duration // of the last grant or Extend
	deadline time.Time
	timer    *time.Timer
	expiring bool // the timer fired; the node is being deleted
}

// arm starts the TTL of a lock this Backend was just granted, replacing
// the timer of an earlier grant to the same owner.
func (b *Backend) arm(k holdKey, path string, ttl time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if old, ok := b.holds[k]; ok {
		old.timer.Stop()
	}
	h := &hold{path: path, ttl: ttl, deadline: time.Now().Add(ttl)}
	h.timer = time.AfterFunc(ttl, func() { b.expire(k, h) })
	b.holds[k] = h
}

// pause stops the TTL timer of a lock before Extend asks the server about
// it, so the timer cannot fire while the answer is on its way. expired is
// true if the TTL has already passed; h is nil if this Backend did not
// take the lock.
func (b *Backend) pause(k holdKey) (h *hold, expired bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.holds[k]
	if !ok {
		return nil, false
	}
	if h.expiring || !h.timer.Stop() {
		return nil, true
	}
	return h, false
}

// resume restarts a paused timer: with ttl from now after a successful
// Extend, with what was left after a failed one. It drops the hold when
// the lock turned out to be gone.
func (b *Backend) resume(k holdKey, h *hold, ttl time.Duration, extended, gone bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.holds[k] != h {
		return
	}
	switch {
	case gone:
		delete(b.holds, k)
	case extended:
		h.ttl = ttl
		h.deadline = time.Now().Add(ttl)
		h.timer.Reset(ttl)
	default:
		h.timer.Reset(max(time.Until(h.deadline), 0))
	}
}

// drop forgets a lock that is being released.
func (b *Backend) drop(k holdKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.holds[k]; ok {
		h.timer.Stop()
		delete(b.holds, k)
	}
}

// take forgets a lock this Backend holds and returns its node, for
// Release; ok is false if there is none or its TTL has passed.
func (b *Backend) take(k holdKey) (path string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, found := b.holds[k]
	if !found {
		return "", false
	}
	h.timer.Stop()
	delete(b.holds, k)
	return h.path, !h.expiring
}

// expire deletes the node of a lock whose TTL passed without an Extend.
func (b *Backend) expire(k holdKey, h *hold) {
	b.mu.Lock()
	if b.closed || b.holds[k] != h {
		b.mu.Unlock()
		return
	}
	h.expiring = true
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	forget := func() {
		b.mu.Lock()
		if b.holds[k] == h {
			delete(b.holds, k)
		}
		b.mu.Unlock()
	}
	err := b.conn.Delete(h.path, -1)
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		forget()
	case !final(err):
		// The request may not have reached the server: the reaper
		// deletes the node once the client has a session again. The
		// hold stays, marked expiring, so that Extend keeps refusing it
		// meanwhile.
		if b.logger != nil {
			b.logger.Warn("zookeeper: delete the node of an expired lock; deleting it once reconnected", "path", h.path, "err", err)
		}
		b.doom(doomed{path: h.path}, forget)
	default:
		// The session is gone (and its nodes with it), or the server
		// refused: the hold stays, marked expiring, so that Extend keeps
		// refusing it.
		if b.logger != nil {
			b.logger.Warn("zookeeper: delete the node of an expired lock", "path", h.path, "err", err)
		}
	}
}
