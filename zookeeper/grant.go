package zookeeper

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
)

// The session bounds every lease: a server frees the locks of a client
// it has not heard from for the session timeout, whatever TTL the
// holder trusts. The servers grant the session timeout, not the client:
// one above their maxSessionTimeout (40 s with the default tickTime) is
// cut to it, and a reconnection to a server with a lower cap cuts it
// again. A lease is therefore granted and renewed only for a TTL the
// session granted covers: a renewal of ttl sent at t reaches the server
// after t, which keeps the session until at least a session timeout
// later, and the holder trusts its lease until t + ttl at most.

// GrantedSessionTimeout is the session timeout the servers granted at
// the client's last connection: what was asked (SessionTimeout), or
// less when the servers' maxSessionTimeout caps it, or more when their
// minSessionTimeout raises it.
func (b *Backend) GrantedSessionTimeout() time.Duration { return b.tracker.grantedTimeout() }

// fitTTL refuses a lease of ttl that the session granted does not cover,
// saying what to change.
func (b *Backend) fitTTL(ttl time.Duration) error {
	granted := b.GrantedSessionTimeout()
	if ttl <= granted {
		return nil
	}
	why := fmt.Sprintf("the servers' maxSessionTimeout cuts the %v asked for", b.timeout)
	change := fmt.Sprintf("raise maxSessionTimeout in the servers' zoo.cfg to at least %v", ttl)
	if granted >= b.timeout {
		why = "the session asked for is that short"
		change = fmt.Sprintf("a session timeout of at least %v (session_timeout in the URL, or WithSessionTimeout; leave session_timeout out and it is the TTL), within the servers' maxSessionTimeout", ttl)
	}
	return fmt.Errorf("%w: zookeeper: the lease TTL %v is longer than the session timeout that ZooKeeper (%s) granted, %v (%s): the servers free the lock of a holder they have not heard from for the session timeout, while the holder would trust its lease for the TTL; use a TTL of at most %v (--ttl, turnstile.WithTTL), or %s",
		turnstile.ErrInvalidOption, ttl, b.servers, granted, why, granted, change)
}

// renewable decides whether the hold k may be renewed for ttl: nil to go
// ahead; lost when the session was cut below the hold's TTL at a
// reconnection, so that the hold must be given up and reported lost; or
// fitTTL's error for a renewal that asks for more than the session
// covers, which leaves the hold as it was.
func (b *Backend) renewable(k holdKey, ttl time.Duration) (lost bool, err error) {
	err = b.fitTTL(ttl)
	if err == nil {
		return false, nil
	}
	b.mu.Lock()
	h, ok := b.holds[k]
	cut := ok && h.ttl > b.GrantedSessionTimeout()
	b.mu.Unlock()
	if cut {
		return true, nil
	}
	return false, err
}

// giveUp forgets the hold k, whose session no longer covers its TTL, and
// deletes its node so that the next owner need not wait for the TTL.
func (b *Backend) giveUp(ctx context.Context, k holdKey) {
	p, ok := b.take(k)
	if !ok {
		return
	}
	if b.logger != nil {
		b.logger.Warn("zookeeper: giving up a lock whose TTL the session no longer covers", "path", p, "session", b.GrantedSessionTimeout())
	}
	_ = b.deleteOrDoom(ctx, p, -1)
}
