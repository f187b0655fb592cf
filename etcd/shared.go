package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A backend's plain locks and their waiters' keys share one etcd lease
// per TTL class (the lease's whole seconds), as the sessions of etcd's
// own concurrency.Mutex do: a lease costs etcd's log a write to grant
// and another to revoke or expire, so a lease per lock made every pair
// of Acquire and Release cost four writes instead of two. The lease is
// granted on first use, renewed by every holder's Extend and by
// acquisitions (on the renewer's one stream; AcquireSince and
// AcquireWaitSince only when its last renewal is over a tenth of the
// TTL old), and left to expire
// when nothing renews it. Each lock key is still its own: written and
// deleted in transactions that compare its owner, so that a release or
// a forced release ends that lock alone. A lease that ends on the
// server — it expired, or someone revoked it — ends exactly the keys on
// it: each holder's next Extend finds its key gone, and the next
// acquisition grants a new lease.

// errLeaseLost means a shared lease ended on the server.
var errLeaseLost = errors.New("etcd: shared lease ended")

// leaseState is where a shared lease is.
type leaseState int

const (
	leaseLive leaseState = iota // granted; not known to have ended
	leaseLost                   // the server said it does not know it
)

// sharedLease is one etcd lease under a backend's locks of one TTL
// class.
type sharedLease struct {
	id    clientv3.LeaseID
	class int64 // the seconds asked for: the pool's key
	ttl   int64 // the seconds etcd granted (it may raise a short TTL)

	mu    sync.Mutex
	state leaseState
	until time.Time // before it the lease is certainly alive, by the client's clock: the last answered grant or renewal's send time + ttl
}

// usable reports whether the lease may still be alive on the server.
func (l *sharedLease) usable(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == leaseLive && now.Before(l.until)
}

// hold is how long a lock written or renewed under l lasts, as a lease
// of its own with the TTL etcd granted l would: the sweeper's bound.
func (l *sharedLease) hold() time.Duration { return time.Duration(l.ttl) * time.Second }

// holds reports whether etcd holds l for all but a tenth of ttl from t
// at least, by its last grant or renewal answered: a lock granted under
// l at t then need not renew it.
func (l *sharedLease) holds(t time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == leaseLive && !l.until.Before(t.Add(ttl-ttl/10))
}

// since is the time from which a lock granted under l at t is held for
// ttl at least, by l's last grant or renewal answered: no later than t,
// from which the sweeper counts the lock's own deadline (see sweep.go).
func (l *sharedLease) since(t time.Time, ttl time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.until.Add(-ttl); s.Before(t) {
		return s
	}
	return t
}

// renewed records a renewal sent at sent that etcd answered with ttl.
func (l *sharedLease) renewed(sent time.Time, ttl int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := sent.Add(time.Duration(ttl) * time.Second); until.After(l.until) {
		l.until = until
	}
}

// leasePool is a backend's shared leases, one per TTL class.
type leasePool struct {
	mu       sync.Mutex
	byClass  map[int64]*sharedLease
	byID     map[clientv3.LeaseID]*sharedLease
	granting map[int64]chan struct{} // closed when a grant of the class ends
}

// lease returns the live lease of class secs, granting one when there
// is none (one grant at a time per class; the other callers wait for
// it). fresh reports that this call granted it, so that its TTL runs
// from after the call began; otherwise the caller renews it.
func (b *Backend) lease(ctx context.Context, secs int64) (l *sharedLease, fresh bool, err error) {
	p := &b.leases
	for {
		p.mu.Lock()
		if l := p.byClass[secs]; l != nil && l.usable(time.Now()) {
			p.mu.Unlock()
			return l, false, nil
		}
		if wait, ok := p.granting[secs]; ok {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
		}
		if p.granting == nil {
			p.granting = make(map[int64]chan struct{})
			p.byClass = make(map[int64]*sharedLease)
			p.byID = make(map[clientv3.LeaseID]*sharedLease)
		}
		done := make(chan struct{})
		p.granting[secs] = done
		p.mu.Unlock()

		sent := time.Now()
		resp, err := b.cli.Grant(ctx, secs)
		p.mu.Lock()
		delete(p.granting, secs)
		close(done)
		if err != nil {
			p.mu.Unlock()
			return nil, false, err
		}
		l = &sharedLease{id: resp.ID, class: secs, ttl: resp.TTL, until: sent.Add(time.Duration(resp.TTL) * time.Second)}
		if old := p.byClass[secs]; old != nil {
			delete(p.byID, old.id)
		}
		p.byClass[secs], p.byID[l.id] = l, l
		p.mu.Unlock()
		return l, true, nil
	}
}

// current is the live lease of class secs, or nil; it grants none.
func (b *Backend) current(secs int64) *sharedLease {
	p := &b.leases
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.byClass[secs]; l != nil && l.usable(time.Now()) {
		return l
	}
	return nil
}

// lost marks l ended on the server, so that no lock is written on it
// again.
func (b *Backend) lost(l *sharedLease) {
	b.untrackLease(l.id)
	l.mu.Lock()
	l.state = leaseLost
	l.mu.Unlock()
	p := &b.leases
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byClass[l.class] == l {
		delete(p.byClass, l.class)
	}
	delete(p.byID, l.id)
}

// renewShared renews l on the renewer's stream and returns the TTL etcd
// granted; errLeaseLost when the lease has ended.
func (b *Backend) renewShared(ctx context.Context, l *sharedLease) (int64, error) {
	sent := time.Now()
	ttl, err := b.ka.renew(ctx, l.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.lost(l)
		return 0, errLeaseLost
	}
	if err != nil {
		return 0, err
	}
	l.renewed(sent, ttl)
	return ttl, nil
}

// renewID renews lease id, a shared lease of the backend's or another
// (a key written by another backend, or by an earlier version with a
// lease per lock), and returns the TTL etcd granted; errLeaseLost when
// the lease has ended.
func (b *Backend) renewID(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	b.leases.mu.Lock()
	l := b.leases.byID[id]
	b.leases.mu.Unlock()
	if l != nil {
		return b.renewShared(ctx, l)
	}
	ttl, err := b.ka.renew(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, errLeaseLost
	}
	return ttl, err
}

// renewing renews l in the background unless skip (a lease granted or
// renewed just now), and returns the channel its outcome arrives on.
func (b *Backend) renewing(ctx context.Context, l *sharedLease, skip bool) <-chan error {
	ch := make(chan error, 1)
	if skip {
		ch <- nil
		return ch
	}
	go func() {
		_, err := b.renewShared(ctx, l)
		ch <- err
	}()
	return ch
}

// leaseGone reports whether err says a write named a lease etcd does not
// know.
func leaseGone(err error) bool { return errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) }
